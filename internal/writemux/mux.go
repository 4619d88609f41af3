// Package writemux owns the client side of a Write stream: one long-lived
// stream per connection carrying many Submit, Report and Deliver calls,
// each matched to its answer by seq. The Go client uses it towards a node;
// a follower uses it to forward writes to the leader.
//
// A call's error is what the unary call's would be: a status with the
// outcome detail, or a transport failure. When the node drains the stream
// (it stops), every call it did not answer was never processed, and the
// call fails with UNAVAILABLE and its sent flag cleared; when the stream
// breaks, a call that was on it may have been processed.
package writemux

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/writ-dev/writ/api/writv1"
)

// ErrNoStream says the node serves no Write stream (a node from before
// it): the call was not sent; make it as a unary call instead.
var ErrNoStream = errors.New("writemux: the node has no Write stream")

// ErrClosed is the error of a call after Close.
var ErrClosed = errors.New("writemux: closed")

// Mux carries one connection's calls on one Write stream, opened on first
// use and again after it ends.
type Mux struct {
	conn  *grpc.ClientConn
	calls int
	open  func(ctx context.Context) metadata.MD

	mu     sync.Mutex
	cur    *stream
	unary  bool // the node has no Write method
	closed bool
}

// New returns a Mux over conn that keeps at most calls calls in flight on
// its stream (further calls wait for a slot). open, if set, gives the
// outgoing metadata a stream is opened with, from the context of the call
// that opens it.
func New(conn *grpc.ClientConn, calls int, open func(ctx context.Context) metadata.MD) *Mux {
	return &Mux{conn: conn, calls: max(calls, 1), open: open}
}

// stream is one open Write stream and its calls in flight.
type stream struct {
	cs     grpc.BidiStreamingClient[writv1.WriteRequest, writv1.WriteResponse]
	cancel context.CancelFunc
	slots  chan struct{}
	sendMu sync.Mutex

	mu      sync.Mutex
	seq     uint64
	pending map[uint64]chan *writv1.WriteResponse
	drained bool  // the node said every unanswered call was not processed
	err     error // why the stream ended
	done    chan struct{}
}

// Call sends req (its seq, and its deadline from ctx, are set here) and
// waits for its answer. sent (may be nil) is set once the call may have
// reached the node, and cleared when the node drained the stream without
// processing it. ErrNoStream means the call was not sent.
func (m *Mux) Call(ctx context.Context, req *writv1.WriteRequest, sent *atomic.Bool) (*writv1.WriteResponse, error) {
	st, err := m.stream(ctx)
	if err != nil {
		return nil, err
	}
	select {
	case st.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, status.FromContextError(ctx.Err()).Err()
	case <-st.done:
		return nil, st.endErr()
	}
	defer func() { <-st.slots }()
	if dl, ok := ctx.Deadline(); ok {
		req.DeadlineMs = uint32(max(time.Until(dl).Milliseconds(), 1))
	}
	ch := make(chan *writv1.WriteResponse, 1)
	st.mu.Lock()
	if st.err != nil || st.drained {
		st.mu.Unlock()
		return nil, st.endErr()
	}
	st.seq++
	req.Seq = st.seq
	st.pending[req.Seq] = ch
	st.mu.Unlock()

	st.sendMu.Lock()
	err = st.cs.Send(req)
	st.sendMu.Unlock()
	if err != nil {
		// gRPC did not take the message: the stream had ended
		st.forget(req.Seq)
		<-st.done
		return nil, st.endErr()
	}
	if sent != nil {
		sent.Store(true)
	}
	select {
	case r := <-ch:
		return r, nil
	case <-ctx.Done():
		st.forget(req.Seq)
		return nil, status.FromContextError(ctx.Err()).Err()
	case <-st.done:
		select {
		case r := <-ch: // answered just before the end
			return r, nil
		default:
		}
		err := st.endErr()
		st.mu.Lock()
		notProcessed := st.drained || errors.Is(err, ErrNoStream)
		st.mu.Unlock()
		if notProcessed && sent != nil {
			sent.Store(false)
		}
		return nil, err
	}
}

// endErr is a call's error once its stream ended. A stream that ended
// Unimplemented never reached a Write method (the node has none), so no
// call on it was processed, sent or not.
func (st *stream) endErr() error {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.drained {
		return status.Error(codes.Unavailable, "writemux: the node stopped taking calls on this stream before it processed this one (not appended)")
	}
	if status.Code(st.err) == codes.Unimplemented {
		return ErrNoStream
	}
	if st.err == nil || errors.Is(st.err, context.Canceled) {
		return status.Error(codes.Unavailable, "writemux: the Write stream ended before the call was answered")
	}
	return st.err
}

func (st *stream) forget(seq uint64) {
	st.mu.Lock()
	delete(st.pending, seq)
	st.mu.Unlock()
}

// stream returns the open stream, opening one when there is none; ctx
// bounds only the opening.
func (m *Mux) stream(ctx context.Context) (*stream, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrClosed
	}
	if m.unary {
		return nil, ErrNoStream
	}
	if m.cur != nil {
		return m.cur, nil
	}
	sctx, cancel := context.WithCancel(context.Background())
	if m.open != nil {
		if md := m.open(ctx); len(md) > 0 {
			sctx = metadata.NewOutgoingContext(sctx, md)
		}
	}
	stop := context.AfterFunc(ctx, cancel)
	cs, err := writv1.NewWritClient(m.conn).Write(sctx)
	if !stop() {
		cancel()
		if err == nil {
			err = status.FromContextError(ctx.Err()).Err()
		}
	}
	if err != nil {
		cancel()
		if status.Code(err) == codes.Unimplemented {
			m.unary = true
			return nil, ErrNoStream
		}
		return nil, err
	}
	st := &stream{cs: cs, cancel: cancel, slots: make(chan struct{}, m.calls),
		pending: map[uint64]chan *writv1.WriteResponse{}, done: make(chan struct{})}
	m.cur = st
	go m.receive(st)
	return st, nil
}

// receive hands each answer to its call until the stream ends.
func (m *Mux) receive(st *stream) {
	for {
		r, err := st.cs.Recv()
		if err != nil {
			m.detach(st)
			st.mu.Lock()
			st.err = err
			st.pending = nil
			st.mu.Unlock()
			if status.Code(err) == codes.Unimplemented {
				m.mu.Lock()
				m.unary = true
				m.mu.Unlock()
			}
			close(st.done)
			st.cancel()
			return
		}
		if r.GetDrained() {
			// no new call goes on this stream; Recv ends it next
			m.detach(st)
			st.mu.Lock()
			st.drained = true
			st.mu.Unlock()
			continue
		}
		st.mu.Lock()
		ch := st.pending[r.GetSeq()]
		delete(st.pending, r.GetSeq())
		st.mu.Unlock()
		if ch != nil {
			ch <- r
		}
	}
}

// detach makes the next call open a new stream.
func (m *Mux) detach(st *stream) {
	m.mu.Lock()
	if m.cur == st {
		m.cur = nil
	}
	m.mu.Unlock()
}

// Close ends the open stream; calls after it fail with ErrClosed.
func (m *Mux) Close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	if m.cur != nil {
		m.cur.cancel()
		m.cur = nil
	}
}

// ReplyErr is the error an answer carries (nil if none), as the unary
// call would have returned it.
func ReplyErr(r *writv1.WriteResponse) error {
	e := r.GetError()
	if e == nil {
		return nil
	}
	st := status.New(codes.Code(e.GetCode()), e.GetMessage())
	if d := e.GetDetail(); d != nil {
		if wd, err := st.WithDetails(d); err == nil {
			st = wd
		}
	}
	return st.Err()
}

// Mismatched is the error of an answer of the wrong kind: the node's
// outcome for the call is unknown, so it is a failure to hear from the
// node (retried with the same ID, else uncertain).
func Mismatched(r *writv1.WriteResponse) error {
	return status.Errorf(codes.Unavailable, "writemux: the node answered a call on the Write stream with %T: its outcome is unknown", r.GetReply())
}
