package client

import (
	"context"
	"errors"
	"sync/atomic"

	"google.golang.org/grpc"

	"github.com/writ-dev/writ/api/writv1"
	"github.com/writ-dev/writ/internal/writemux"
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

// streamWrit is the writ.v1 stub for one endpoint with Submit, Report and
// Deliver on its Write stream; every other call, and those three when the
// endpoint has no Write stream, are unary.
type streamWrit struct {
	writv1.WritClient
	m *writemux.Mux
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
func onStream[R comparable](ctx context.Context, m *writemux.Mux, e *writv1.Entry, req *writv1.WriteRequest,
	get func(*writv1.WriteResponse) R, unary func() (R, error)) (R, error) {
	var zero R
	if len(e.GetPayload()) > streamMaxPayload {
		return unary()
	}
	sent, _ := ctx.Value(sentKey{}).(*atomic.Bool)
	r, err := m.Call(ctx, req, sent)
	switch {
	case errors.Is(err, writemux.ErrNoStream):
		return unary()
	case errors.Is(err, writemux.ErrClosed):
		return zero, ErrClosed
	case err != nil:
		return zero, err
	}
	if err := writemux.ReplyErr(r); err != nil {
		return zero, err
	}
	out := get(r)
	if out == zero {
		return zero, writemux.Mismatched(r)
	}
	return out, nil
}
