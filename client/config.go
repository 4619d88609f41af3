package client

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/writ-dev/writ/api/writv1"
	"github.com/writ-dev/writ/internal/writemux"
)

// Defaults of the Config durations.
const (
	DefaultDialTimeout    = 5 * time.Second
	DefaultRequestTimeout = 10 * time.Second
)

// Config describes how a Client reaches a cluster.
type Config struct {
	// Endpoints are writd API addresses (host:port). At least one; the
	// client fails over between them.
	Endpoints []string
	// TLS secures the connections; nil: plaintext.
	TLS *tls.Config
	// Token is sent with every call as "authorization: Bearer <Token>";
	// empty: none. A token needs TLS unless InsecureToken is set.
	Token string
	// InsecureToken allows Token over a plaintext connection (tests on
	// loopback only).
	InsecureToken bool
	// DialTimeout bounds how long a connection attempt to one endpoint may
	// take (default DefaultDialTimeout).
	DialTimeout time.Duration
	// RequestTimeout bounds one attempt of a call on one endpoint (default
	// DefaultRequestTimeout); Submit adds its commit timeout. The caller's
	// context bounds the whole call, retries included.
	RequestTimeout time.Duration
	// MaxAttempts bounds the attempts of one call across endpoints (default:
	// two per endpoint, at least 3).
	MaxAttempts int
	// DialOptions are appended to the client's own gRPC dial options.
	DialOptions []grpc.DialOption
	// Stream sends Submit, Report and Deliver (the typed calls and Raw's)
	// on one long-lived Write stream per endpoint instead of a unary call
	// each: less CPU per call on both sides when many calls run at once.
	// Outcomes, retries and errors are the unary calls'. A node stopping
	// gracefully answers the calls it took and tells the client the rest
	// were not processed, so they go to the next endpoint. Against a node
	// without the Write stream the calls are unary.
	Stream bool
}

// Client talks to a writ cluster through a list of endpoints. It is safe
// for concurrent use.
type Client struct {
	cfg Config
	raw rawWrit

	mu         sync.Mutex
	eps        []*endpoint
	cur        int       // the endpoint calls stick to while it answers
	leader     int       // index of the leader's endpoint, -1: unknown
	leaderSeen time.Time // when the leader was last looked up
	closed     bool
}

// New checks cfg and returns a Client. It does not connect: connections are
// made on first use, so New succeeds while the cluster is down.
func New(cfg Config) (*Client, error) {
	if len(cfg.Endpoints) == 0 {
		return nil, errors.New("client: Config.Endpoints is empty: list at least one writd API address host:port")
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = DefaultDialTimeout
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = DefaultRequestTimeout
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = max(3, 2*len(cfg.Endpoints))
	}
	if cfg.Token != "" && cfg.TLS == nil && !cfg.InsecureToken {
		return nil, errors.New("client: Config.Token needs Config.TLS: a bearer token must not travel in plaintext (set InsecureToken only for loopback tests)")
	}
	c := &Client{cfg: cfg, leader: -1}
	seen := map[string]bool{}
	for i, a := range cfg.Endpoints {
		a = strings.TrimSpace(a)
		if a == "" {
			return nil, fmt.Errorf("client: Config.Endpoints[%d] is empty: give host:port of a writd API", i)
		}
		if seen[a] {
			continue
		}
		seen[a] = true
		conn, err := grpc.NewClient(a, c.dialOptions()...)
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("client: endpoint %q: %w", a, err)
		}
		ep := &endpoint{addr: a, conn: conn}
		if cfg.Stream {
			ep.mux = writemux.New(conn, streamCalls, nil)
		}
		c.eps = append(c.eps, ep)
	}
	c.raw = rawWrit{WritClient: writv1.NewWritClient(c), c: c}
	return c, nil
}

func (c *Client) dialOptions() []grpc.DialOption {
	creds := insecure.NewCredentials()
	if c.cfg.TLS != nil {
		creds = credentials.NewTLS(c.cfg.TLS)
	}
	bo := backoff.DefaultConfig
	bo.MaxDelay = 2 * time.Second
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: bo, MinConnectTimeout: c.cfg.DialTimeout}),
		grpc.WithChainUnaryInterceptor(sentUnary),
		grpc.WithChainStreamInterceptor(sentStream),
	}
	if c.cfg.Token != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(bearer{token: c.cfg.Token, secure: c.cfg.TLS != nil}))
	}
	return append(opts, c.cfg.DialOptions...)
}

// Close closes every connection. Calls after Close fail.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	var errs []error
	for _, e := range c.eps {
		if e.mux != nil {
			e.mux.Close()
		}
		if e.conn != nil {
			errs = append(errs, e.conn.Close())
		}
	}
	return errors.Join(errs...)
}

// Endpoints returns the endpoint list, deduplicated, in order.
func (c *Client) Endpoints() []string {
	out := make([]string, len(c.eps))
	for i, e := range c.eps {
		out[i] = e.addr
	}
	return out
}

// Raw returns the generated writ.v1 stub over the client's endpoints: each
// call goes to the current endpoint and moves to the next one only when the
// request never left the client. Use it for calls without a typed method.
// With Config.Stream, its Submit, Report and Deliver use the Write stream.
func (c *Client) Raw() writv1.WritClient { return c.raw }

// writClient is the stub for one attempt on endpoint i.
func (c *Client) writClient(i int, conn *grpc.ClientConn) writv1.WritClient {
	w := writv1.NewWritClient(conn)
	if m := c.eps[i].mux; m != nil {
		return streamWrit{WritClient: w, m: m}
	}
	return w
}

// rawWrit is Raw: the stub over Invoke, with Submit, Report and Deliver
// on the chosen endpoint's Write stream when Config.Stream is set.
type rawWrit struct {
	writv1.WritClient
	c *Client
}

func (r rawWrit) Submit(ctx context.Context, in *writv1.SubmitRequest, opts ...grpc.CallOption) (*writv1.SubmitResponse, error) {
	if !r.c.cfg.Stream {
		return r.WritClient.Submit(ctx, in, opts...)
	}
	return rawOn(ctx, r.c, writv1.Writ_Submit_FullMethodName, func(ctx context.Context, w writv1.WritClient) (*writv1.SubmitResponse, error) {
		return w.Submit(ctx, in, opts...)
	})
}

func (r rawWrit) Report(ctx context.Context, in *writv1.ReportRequest, opts ...grpc.CallOption) (*writv1.ReportResponse, error) {
	if !r.c.cfg.Stream {
		return r.WritClient.Report(ctx, in, opts...)
	}
	return rawOn(ctx, r.c, writv1.Writ_Report_FullMethodName, func(ctx context.Context, w writv1.WritClient) (*writv1.ReportResponse, error) {
		return w.Report(ctx, in, opts...)
	})
}

func (r rawWrit) Deliver(ctx context.Context, in *writv1.DeliverRequest, opts ...grpc.CallOption) (*writv1.DeliverResponse, error) {
	if !r.c.cfg.Stream {
		return r.WritClient.Deliver(ctx, in, opts...)
	}
	return rawOn(ctx, r.c, writv1.Writ_Deliver_FullMethodName, func(ctx context.Context, w writv1.WritClient) (*writv1.DeliverResponse, error) {
		return w.Deliver(ctx, in, opts...)
	})
}

// rawOn runs call with the chosen endpoint's stub (its Write stream),
// moving on only while the request never left, as Invoke does.
func rawOn[R any](ctx context.Context, c *Client, method string, call func(context.Context, writv1.WritClient) (R, error)) (R, error) {
	var out R
	err := c.untilSent(ctx, method, func(ctx context.Context, i int, conn *grpc.ClientConn) (err error) {
		out, err = call(ctx, c.writClient(i, conn))
		return err
	})
	return out, err
}

// bearer sends the token as a per-call authorization header.
type bearer struct {
	token  string
	secure bool
}

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + b.token}, nil
}

func (b bearer) RequireTransportSecurity() bool { return b.secure }
