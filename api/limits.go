package api

import (
	"log/slog"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"
)

// Limits bound what clients can hold open on one node.
type Limits struct {
	// MaxStreams is the most concurrent calls on one connection.
	MaxStreams int
	// MaxWatchers and MaxWatchersPerConn bound concurrent Watch streams on
	// the node and on one connection.
	MaxWatchers        int
	MaxWatchersPerConn int
	// KeepaliveMinTime is the shortest interval between client pings
	// allowed; a client pinging more often is disconnected.
	KeepaliveMinTime time.Duration
	// Logger receives a WARN line for refused watches (at most one a
	// second, with the count of those not logged); nil discards them.
	Logger *slog.Logger
}

// ServerOptions are the gRPC server options for the API: limits,
// keepalive enforcement and the auth and watcher interceptors.
func ServerOptions(l Limits, a *Auth) []grpc.ServerOption {
	w := &watchers{max: l.MaxWatchers, perConn: l.MaxWatchersPerConn, conns: map[string]int{}, log: l.Logger}
	if w.log == nil {
		w.log = slog.New(slog.DiscardHandler)
	}
	opts := []grpc.ServerOption{
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: l.KeepaliveMinTime, PermitWithoutStream: true}),
		// find and close connections whose client vanished
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 2 * time.Minute, Timeout: 20 * time.Second}),
		grpc.ChainStreamInterceptor(a.Stream, w.stream),
		grpc.ChainUnaryInterceptor(a.Unary),
	}
	if l.MaxStreams > 0 {
		opts = append(opts, grpc.MaxConcurrentStreams(uint32(l.MaxStreams)))
	}
	return opts
}

// watchers counts open Watch streams, on the node and per connection.
type watchers struct {
	max, perConn int

	log *slog.Logger

	mu    sync.Mutex
	total int
	conns map[string]int // peer address -> open watches
	// lastLog and quiet rate-limit refusal lines: a client retrying in a
	// loop must not fill the log.
	lastLog time.Time
	quiet   int
}

func (w *watchers) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if info.FullMethod != "/writ.v1.Writ/Watch" {
		return handler(srv, ss)
	}
	conn := peerAddr(ss.Context())
	if err := w.acquire(conn); err != nil {
		return err
	}
	defer w.release(conn)
	return handler(srv, ss)
}

func (w *watchers) acquire(conn string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.max > 0 && w.total >= w.max {
		w.refused(conn, "api.max_watchers", w.max)
		return status.Errorf(codes.ResourceExhausted, "api: this node already serves %d watches (api.max_watchers): close one, watch another node, or raise api.max_watchers", w.total)
	}
	if w.perConn > 0 && w.conns[conn] >= w.perConn {
		w.refused(conn, "api.max_watchers_per_conn", w.perConn)
		return status.Errorf(codes.ResourceExhausted, "api: this connection already holds %d watches (api.max_watchers_per_conn): close one, open another connection, or raise api.max_watchers_per_conn", w.conns[conn])
	}
	w.total++
	w.conns[conn]++
	return nil
}

func (w *watchers) release(conn string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.total--
	if w.conns[conn]--; w.conns[conn] <= 0 {
		delete(w.conns, conn)
	}
}

// refused logs a refused watch, at most once a second; w.mu is held.
func (w *watchers) refused(conn, limit string, n int) {
	now := time.Now()
	if now.Sub(w.lastLog) < time.Second {
		w.quiet++
		return
	}
	w.log.Warn("api: watch refused", "peer", conn, "limit", limit, "max", n, "open", w.total, "not_logged_since_last", w.quiet)
	w.lastLog, w.quiet = now, 0
}
