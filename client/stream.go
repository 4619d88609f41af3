package client

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/writ-dev/writ/api/writv1"
)

// streamCalls is how many calls the client keeps in flight on one Write
// stream; further calls wait for a slot (their context still bounds
// them). It is the node's default api.max_stream_calls, which matches
// api.max_streams, the bound on unary calls over one connection: a stream
// lets no more calls at a node than unary calls did.
const streamCalls = 256

// streamMaxPayload is the largest payload sent on the Write stream; a
// larger one goes as a unary call, so that it does not hold up the calls
// queued behind it on the stream (messages on one stream are sent one
// after another; unary calls interleave).
const streamMaxPayload = 64 << 10

// errNoWriteStream says the endpoint serves no Write stream (a node from
// before it): the call goes as a unary call instead.
var errNoWriteStream = errors.New("client: the endpoint has no Write stream")

// writeMux carries one endpoint's Submit, Report and Deliver calls on one
// long-lived Write stream (Config.Stream), opened on first use and again
// after it ends.
type writeMux struct {
	conn *grpc.ClientConn

	mu     sync.Mutex
	cur    *writeStream
	unary  bool // the endpoint has no Write method
	closed bool
}

// writeStream is one open Write stream and its calls in flight.
type writeStream struct {
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

// call sends req (its seq is set here) and waits for its answer. The
// error is what the unary call's would be: a status with the outcome
// detail, or a transport failure. sent (from trackSent, may be nil) is set
// once the call may have reached the node, and cleared when the node
// drained the stream without processing it. errNoWriteStream means the
// call was not sent and should go unary.
func (m *writeMux) call(ctx context.Context, req *writv1.WriteRequest) (*writv1.WriteResponse, error) {
	st, err := m.stream(ctx)
	if err != nil {
		return nil, err
	}
	select {
	case st.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, status.FromContextError(ctx.Err()).Err()
	case <-st.done:
		return nil, st.endErr(false)
	}
	defer func() { <-st.slots }()
	if dl, ok := ctx.Deadline(); ok {
		req.DeadlineMs = uint32(max(time.Until(dl).Milliseconds(), 1))
	}
	ch := make(chan *writv1.WriteResponse, 1)
	st.mu.Lock()
	if st.err != nil || st.drained {
		st.mu.Unlock()
		return nil, st.endErr(false)
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
		return nil, st.endErr(false)
	}
	sent, _ := ctx.Value(sentKey{}).(*atomic.Bool)
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
		st.mu.Lock()
		drained := st.drained
		st.mu.Unlock()
		if drained && sent != nil {
			sent.Store(false)
		}
		return nil, st.endErr(true)
	}
}

// endErr is a call's error once its stream ended; wasSent: the call was
// on it unanswered.
func (st *writeStream) endErr(wasSent bool) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.drained {
		return status.Error(codes.Unavailable, "client: the node stopped taking calls on this stream before it processed this one (not appended)")
	}
	if status.Code(st.err) == codes.Unimplemented && !wasSent {
		return errNoWriteStream
	}
	if st.err == nil || errors.Is(st.err, context.Canceled) {
		return status.Error(codes.Unavailable, "client: the Write stream ended before the call was answered")
	}
	return st.err
}

func (st *writeStream) forget(seq uint64) {
	st.mu.Lock()
	delete(st.pending, seq)
	st.mu.Unlock()
}

// stream returns the open stream, opening one when there is none; ctx
// bounds only the opening.
func (m *writeMux) stream(ctx context.Context) (*writeStream, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrClosed
	}
	if m.unary {
		return nil, errNoWriteStream
	}
	if m.cur != nil {
		return m.cur, nil
	}
	sctx, cancel := context.WithCancel(context.Background())
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
			return nil, errNoWriteStream
		}
		return nil, err
	}
	st := &writeStream{cs: cs, cancel: cancel, slots: make(chan struct{}, streamCalls),
		pending: map[uint64]chan *writv1.WriteResponse{}, done: make(chan struct{})}
	m.cur = st
	go m.receive(st)
	return st, nil
}

// receive hands each answer to its call until the stream ends.
func (m *writeMux) receive(st *writeStream) {
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
func (m *writeMux) detach(st *writeStream) {
	m.mu.Lock()
	if m.cur == st {
		m.cur = nil
	}
	m.mu.Unlock()
}

// close ends the open stream; calls after it fail with ErrClosed.
func (m *writeMux) close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	if m.cur != nil {
		m.cur.cancel()
		m.cur = nil
	}
}

// replyErr is the error of an answer that carries one.
func replyErr(r *writv1.WriteResponse) error {
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

// streamWrit is the writ.v1 stub for one endpoint with Submit, Report and
// Deliver on its Write stream; every other call, and those three when the
// endpoint has no Write stream, are unary.
type streamWrit struct {
	writv1.WritClient
	m *writeMux
}

func (s streamWrit) Submit(ctx context.Context, in *writv1.SubmitRequest, opts ...grpc.CallOption) (*writv1.SubmitResponse, error) {
	return onStream(ctx, s.m, in.GetEntry(), &writv1.WriteRequest{Call: &writv1.WriteRequest_Submit{Submit: in}},
		(*writv1.WriteResponse).GetSubmit, func() (*writv1.SubmitResponse, error) { return s.WritClient.Submit(ctx, in, opts...) })
}

func (s streamWrit) Report(ctx context.Context, in *writv1.ReportRequest, opts ...grpc.CallOption) (*writv1.ReportResponse, error) {
	return onStream(ctx, s.m, in.GetEntry(), &writv1.WriteRequest{Call: &writv1.WriteRequest_Report{Report: in}},
		(*writv1.WriteResponse).GetReport, func() (*writv1.ReportResponse, error) { return s.WritClient.Report(ctx, in, opts...) })
}

func (s streamWrit) Deliver(ctx context.Context, in *writv1.DeliverRequest, opts ...grpc.CallOption) (*writv1.DeliverResponse, error) {
	return onStream(ctx, s.m, in.GetEntry(), &writv1.WriteRequest{Call: &writv1.WriteRequest_Deliver{Deliver: in}},
		(*writv1.WriteResponse).GetDeliver, func() (*writv1.DeliverResponse, error) { return s.WritClient.Deliver(ctx, in, opts...) })
}

// onStream sends req on m's stream and takes its answer with get; a
// payload over streamMaxPayload, or an endpoint without the stream, goes
// through unary instead.
func onStream[R comparable](ctx context.Context, m *writeMux, e *writv1.Entry, req *writv1.WriteRequest,
	get func(*writv1.WriteResponse) R, unary func() (R, error)) (R, error) {
	var zero R
	if len(e.GetPayload()) > streamMaxPayload {
		return unary()
	}
	r, err := m.call(ctx, req)
	if errors.Is(err, errNoWriteStream) {
		return unary()
	}
	if err != nil {
		return zero, err
	}
	if err := replyErr(r); err != nil {
		return zero, err
	}
	out := get(r)
	if out == zero {
		return zero, mismatched(r)
	}
	return out, nil
}

// mismatched is the error of an answer of the wrong kind: the node's
// outcome for the call is unknown, so it is a failure to hear from the
// node (retried with the same ID, else Uncertain).
func mismatched(r *writv1.WriteResponse) error {
	return status.Errorf(codes.Unavailable, "client: the node answered a call on the Write stream with %T: its outcome is unknown", r.GetReply())
}
