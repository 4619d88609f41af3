package client

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/writ-dev/writ/api/writv1"
	"github.com/writ-dev/writ/internal/writemux"
)

// ErrClosed is returned by calls on a closed Client.
var ErrClosed = errors.New("client: closed")

// endpoint is one writd API address and its connection.
type endpoint struct {
	addr      string
	conn      *grpc.ClientConn
	mux       *writemux.Mux // Config.Stream: the endpoint's Write stream
	fails     int           // consecutive failures
	downUntil time.Time     // not chosen before this unless nothing else is left
}

// pick chooses the endpoint for the next attempt: the leader when
// preferLeader and it is healthy, else the current endpoint, else the next
// healthy one; endpoints in tried are skipped. It returns -1 when every
// endpoint was tried.
func (c *Client) pick(preferLeader bool, tried map[int]bool) (int, *grpc.ClientConn, string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return -1, nil, "", ErrClosed
	}
	now := time.Now()
	ok := func(i int) bool { return !tried[i] && !now.Before(c.eps[i].downUntil) }
	i := -1
	switch {
	case preferLeader && c.leader >= 0 && ok(c.leader):
		i = c.leader
	case ok(c.cur):
		i = c.cur
	default:
		for k := 1; k <= len(c.eps); k++ {
			if j := (c.cur + k) % len(c.eps); ok(j) {
				i = j
				break
			}
		}
	}
	if i < 0 {
		// every untried endpoint is marked down: take the one that comes
		// back first rather than give up
		for j := range c.eps {
			if !tried[j] && (i < 0 || c.eps[j].downUntil.Before(c.eps[i].downUntil)) {
				i = j
			}
		}
	}
	if i < 0 {
		return -1, nil, "", nil
	}
	return i, c.eps[i].conn, c.eps[i].addr, nil
}

// up records that endpoint i answered: calls stick to it.
func (c *Client) up(i int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.eps[i].fails, c.eps[i].downUntil = 0, time.Time{}
	c.cur = i
}

// down records a transport failure of endpoint i: it is avoided for a
// growing while, and forgotten as the leader.
func (c *Client) down(i int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.eps[i]
	e.fails++
	d := 200 * time.Millisecond << min(e.fails-1, 5)
	e.downUntil = time.Now().Add(min(d, 5*time.Second))
	if c.leader == i {
		c.leader = -1
	}
	if c.cur == i {
		c.cur = (i + 1) % len(c.eps)
	}
}

// setLeader records the leader's API address when it is one of the
// endpoints ("" or an unknown address forgets the leader).
func (c *Client) setLeader(addr string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.leader = -1
	for i, e := range c.eps {
		if addr != "" && e.addr == addr {
			c.leader = i
		}
	}
	c.leaderSeen = time.Now()
}

// learnLeader asks the current endpoint for the leader when the client has
// none and did not ask within the last second. Failures are ignored: the
// call then goes to the current endpoint, which forwards.
func (c *Client) learnLeader(ctx context.Context) {
	c.mu.Lock()
	skip := len(c.eps) == 1 || c.leader >= 0 || time.Since(c.leaderSeen) < time.Second
	c.mu.Unlock()
	if skip {
		return
	}
	sctx, cancel := context.WithTimeout(ctx, min(c.cfg.DialTimeout, 2*time.Second))
	defer cancel()
	i, conn, _, err := c.pick(false, nil)
	if err != nil || i < 0 {
		return
	}
	s, err := writv1.NewWritClient(conn).Status(sctx, &writv1.StatusRequest{})
	if err != nil {
		if transportFailure(err) && ctx.Err() == nil {
			c.down(i)
		}
		c.mu.Lock()
		c.leaderSeen = time.Now()
		c.mu.Unlock()
		return
	}
	if s.IsLeader {
		c.mu.Lock()
		c.leader, c.leaderSeen = i, time.Now()
		c.mu.Unlock()
		return
	}
	c.setLeader(s.LeaderApi)
}

// leaderMethods are the calls a follower forwards to the leader: sending
// them to the leader saves a hop.
var leaderMethods = map[string]bool{
	writv1.Writ_Submit_FullMethodName:        true,
	writv1.Writ_Deliver_FullMethodName:       true,
	writv1.Writ_ConfigUpgrade_FullMethodName: true,
}

// Invoke implements grpc.ClientConnInterface for Raw: the call goes to the
// chosen endpoint and moves on only while the request never left.
func (c *Client) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	return c.untilSent(ctx, method, func(ctx context.Context, _ int, conn *grpc.ClientConn) error {
		return conn.Invoke(ctx, method, args, reply, opts...)
	})
}

// untilSent runs call on the chosen endpoint, moving to the next one only
// while the request never left the client.
func (c *Client) untilSent(ctx context.Context, method string, call func(context.Context, int, *grpc.ClientConn) error) error {
	lead := leaderMethods[method]
	if lead {
		c.learnLeader(ctx)
	}
	var tried map[int]bool // made on the first failure
	var last error
	for {
		i, conn, _, err := c.pick(lead, tried)
		if err != nil {
			return err
		}
		if i < 0 {
			return last
		}
		if tried == nil {
			tried = map[int]bool{}
		}
		tried[i] = true
		actx, sent := trackSent(ctx)
		err = call(actx, i, conn)
		if err == nil || !transportFailure(err) {
			c.up(i)
			return err
		}
		c.down(i)
		last = err
		if sent.Load() || ctx.Err() != nil {
			return err
		}
	}
}

// NewStream implements grpc.ClientConnInterface for Raw: streams are opened
// on the chosen endpoint, moving on only while nothing was sent.
func (c *Client) NewStream(ctx context.Context, desc *grpc.StreamDesc, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	lead := leaderMethods[method]
	if lead {
		c.learnLeader(ctx)
	}
	tried := map[int]bool{}
	var last error
	for {
		i, conn, _, err := c.pick(lead, tried)
		if err != nil {
			return nil, err
		}
		if i < 0 {
			return nil, last
		}
		tried[i] = true
		actx, sent := trackSent(ctx)
		s, err := conn.NewStream(actx, desc, method, opts...)
		if err == nil {
			c.up(i)
			return s, nil
		}
		if !transportFailure(err) {
			return nil, err
		}
		c.down(i)
		last = err
		if sent.Load() || ctx.Err() != nil {
			return nil, err
		}
	}
}

var _ grpc.ClientConnInterface = (*Client)(nil)

// transportFailure reports whether err is a failure to reach or hear from
// the endpoint (as opposed to an answer from it).
func transportFailure(err error) bool {
	if _, ok := detail(err); ok {
		return false
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled:
		return true
	case codes.Internal:
		// a connection reset mid-call surfaces as Internal with a
		// transport message
		m := status.Convert(err).Message()
		return strings.Contains(m, "transport") || strings.Contains(m, "connection")
	}
	return false
}

// sentKey carries a call's *atomic.Bool "the request may have left".
type sentKey struct{}

// trackSent returns ctx with a flag that the client's interceptors set once
// the call got a stream on a connection (its headers handed to the
// transport): from then on the request may have reached the server. A call
// that fails before that (no connection, a handshake that never completes)
// never left.
func trackSent(ctx context.Context) (context.Context, *atomic.Bool) {
	f := new(atomic.Bool)
	return context.WithValue(ctx, sentKey{}, f), f
}

// sentUnary and sentStream set the trackSent flag: gRPC fills a Peer call
// option only for a call that got a transport stream.
func sentUnary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	f, ok := ctx.Value(sentKey{}).(*atomic.Bool)
	if !ok {
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	var p peer.Peer
	err := invoker(ctx, method, req, reply, cc, append(opts, grpc.Peer(&p))...)
	if p.Addr != nil {
		f.Store(true)
	}
	return err
}

func sentStream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	f, ok := ctx.Value(sentKey{}).(*atomic.Bool)
	if !ok {
		return streamer(ctx, desc, cc, method, opts...)
	}
	var p peer.Peer
	s, err := streamer(ctx, desc, cc, method, append(opts, grpc.Peer(&p))...)
	if err != nil && p.Addr != nil {
		f.Store(true)
	}
	return s, err
}

// markUp and markDown are up and down by endpoint address.
func (c *Client) markUp(addr string) {
	if i := c.index(addr); i >= 0 {
		c.up(i)
	}
}

func (c *Client) markDown(addr string) {
	if i := c.index(addr); i >= 0 {
		c.down(i)
	}
}

func (c *Client) index(addr string) int {
	for i, e := range c.eps {
		if e.addr == addr {
			return i
		}
	}
	return -1
}
