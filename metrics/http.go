package metrics

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// ServerConfig configures the metrics and health listener.
type ServerConfig struct {
	// Addr is host:port (port 0 picks one).
	Addr string
	// Metrics is served on /metrics together with the default registry
	// (etcd's WAL histograms live there). Nil serves only the default one.
	Metrics *Metrics
	// Ready reports readiness and, when not ready, why (/readyz).
	Ready func() (bool, string)
	// Health reports "ok" or "degraded" with reasons (/healthz).
	Health func() (string, []string)
	// Pprof mounts net/http/pprof under /debug/pprof/.
	Pprof bool
	// UIStatus, when set, serves the dashboard on /ui/ and the status it
	// polls on /ui/api/status.
	UIStatus func(context.Context) UIStatus
	// UISchema is the schema the dashboard shows (/ui/api/schema; nil:
	// none).
	UISchema func() UISchema
	// UIFeed, when set, serves the dashboard's live feed of committed
	// outcomes on /ui/api/feed (nil: the page shows no feed).
	UIFeed func(ctx context.Context, after UIFeedCursor) (UIFeedPage, error)
	// UIConflicts lists the open conflict cases for the dashboard, with
	// the token the page sent (/ui/api/conflicts); UIResolve closes one
	// (/ui/api/conflicts/resolve). Nil: the page shows no conflicts panel.
	UIConflicts func(ctx context.Context, token string) ([]UIConflict, error)
	UIResolve   func(ctx context.Context, r UIResolve) (UIResolved, error)
}

// Server is a running listener.
type Server struct {
	lis net.Listener
	srv *http.Server
	err chan error
}

// Handler builds the listener's routes.
func Handler(c ServerConfig) http.Handler {
	mux := http.NewServeMux()
	gs := prometheus.Gatherers{prometheus.DefaultGatherer}
	if c.Metrics != nil {
		gs = append(gs, c.Metrics.reg)
	}
	mux.Handle("/metrics", promhttp.HandlerFor(gs, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}))
	mux.HandleFunc("/livez", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		ok, why := true, ""
		if c.Ready != nil {
			ok, why = c.Ready()
		}
		if !ok {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = fmt.Fprintln(w, "not ready: "+why)
			return
		}
		_, _ = fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		st, reasons := "ok", []string(nil)
		if c.Health != nil {
			st, reasons = c.Health()
		}
		if st != "ok" {
			// Degraded still serves: 200 with the reasons, so that probes
			// restart nothing while operators see why.
			_, _ = fmt.Fprintln(w, st+": "+strings.Join(reasons, "; "))
			return
		}
		_, _ = fmt.Fprintln(w, "ok")
	})
	if c.UIStatus != nil {
		mountUI(mux, c)
	}
	if c.Pprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	return mux
}

// Serve listens on c.Addr and serves Handler(c) until Close.
func Serve(c ServerConfig) (*Server, error) {
	lis, err := net.Listen("tcp", c.Addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: listen %s: %w", c.Addr, err)
	}
	s := &Server{lis: lis, srv: &http.Server{Handler: Handler(c), ReadHeaderTimeout: 5 * time.Second}, err: make(chan error, 1)}
	go func() {
		if err := s.srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.err <- fmt.Errorf("metrics: serve: %w", err)
		}
	}()
	return s, nil
}

// Addr is the bound address.
func (s *Server) Addr() string { return s.lis.Addr().String() }

// Err delivers a failure of the listener.
func (s *Server) Err() <-chan error { return s.err }

// Close stops the listener, giving in-flight scrapes a second.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	return s.srv.Shutdown(ctx)
}
