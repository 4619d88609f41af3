package api

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/writ-dev/writ/api/writv1"
)

// DefaultMaxStreamCalls is how many calls one Write stream may have in
// flight when Config.MaxStreamCalls is not set.
const DefaultMaxStreamCalls = 256

// Write serves a Write stream. Every call on it runs exactly as its unary
// call: through Config.Intercept (authentication, roles, audit), then
// Submit, Report or Deliver, forwarding included. Calls run concurrently
// and are answered as they finish; at most Config.MaxStreamCalls at once,
// beyond which the stream is not read (HTTP/2 flow control then holds the
// client back).
//
// When the node drains (Drain), the stream stops taking calls, waits for
// the ones it took, and ends with a drained message: a call it did not
// answer was never processed, so the client may send it again anywhere.
func (s *Server) Write(stream grpc.BidiStreamingServer[writv1.WriteRequest, writv1.WriteResponse]) error {
	ctx := stream.Context()
	w := &writeStream{s: s, stream: stream, slots: make(chan struct{}, s.maxStreamCalls())}
	reqs := make(chan *writv1.WriteRequest)
	ended := make(chan error, 1)
	go func() {
		for {
			r, err := stream.Recv()
			if err != nil {
				ended <- err
				return
			}
			select {
			case reqs <- r:
			case <-ctx.Done():
				return
			}
		}
	}()
	var calls sync.WaitGroup
	defer calls.Wait()
	for {
		select {
		case <-s.draining:
			return w.drained(&calls)
		case err := <-ended:
			calls.Wait()
			if errors.Is(err, io.EOF) {
				return nil // the client closed its side: every call was answered
			}
			return err
		case r := <-reqs:
			select {
			case w.slots <- struct{}{}:
			case <-s.draining:
				// r is not processed: the drained message says so
				return w.drained(&calls)
			case <-ctx.Done():
				return status.FromContextError(ctx.Err()).Err()
			}
			calls.Add(1)
			go func() {
				defer calls.Done()
				resp := w.call(ctx, r)
				<-w.slots
				w.send(resp)
			}()
		}
	}
}

// Drain makes every Write stream stop taking calls, answer the ones it
// took, and end with a drained message. Call it before the gRPC server's
// GracefulStop, which waits for streams to end. Unary calls are not
// affected. Drain is idempotent.
func (s *Server) Drain() {
	s.drainOnce.Do(func() { close(s.draining) })
}

func (s *Server) maxStreamCalls() int {
	if s.cfg.MaxStreamCalls > 0 {
		return s.cfg.MaxStreamCalls
	}
	return DefaultMaxStreamCalls
}

// streamCallKey marks the context of a call made on a Write stream.
type streamCallKey struct{}

// writeStream is one Write stream being served.
type writeStream struct {
	s      *Server
	stream grpc.BidiStreamingServer[writv1.WriteRequest, writv1.WriteResponse]
	slots  chan struct{} // one per call in flight

	sendMu sync.Mutex
}

// drained waits for the calls in flight, then sends the drained message.
func (w *writeStream) drained(calls *sync.WaitGroup) error {
	calls.Wait()
	w.send(&writv1.WriteResponse{Drained: true})
	return nil
}

// send writes one response; a failure means the client is gone, and its
// calls' outcomes stay with the node (Outcome, a retry with the same ID).
func (w *writeStream) send(r *writv1.WriteResponse) {
	w.sendMu.Lock()
	defer w.sendMu.Unlock()
	_ = w.stream.Send(r)
}

// call runs one call as its unary call would run and wraps its answer.
func (w *writeStream) call(ctx context.Context, r *writv1.WriteRequest) *writv1.WriteResponse {
	s := w.s
	out := &writv1.WriteResponse{Seq: r.GetSeq()}
	var method string
	var req any
	var h grpc.UnaryHandler
	switch c := r.GetCall().(type) {
	case *writv1.WriteRequest_Submit:
		method, req = writv1.Writ_Submit_FullMethodName, c.Submit
		h = func(ctx context.Context, req any) (any, error) { return s.Submit(ctx, req.(*writv1.SubmitRequest)) }
	case *writv1.WriteRequest_Report:
		method, req = writv1.Writ_Report_FullMethodName, c.Report
		h = func(ctx context.Context, req any) (any, error) { return s.Report(ctx, req.(*writv1.ReportRequest)) }
	case *writv1.WriteRequest_Deliver:
		method, req = writv1.Writ_Deliver_FullMethodName, c.Deliver
		h = func(ctx context.Context, req any) (any, error) { return s.Deliver(ctx, req.(*writv1.DeliverRequest)) }
	default:
		out.Reply = &writv1.WriteResponse_Error{Error: &writv1.WriteError{Code: uint32(codes.InvalidArgument),
			Message: "api: a Write call carries none of submit, report or deliver: set the call field"}}
		return out
	}
	ctx, err := callContext(context.WithValue(ctx, streamCallKey{}, true), r.GetMetadata())
	if err != nil {
		out.Reply = &writv1.WriteResponse_Error{Error: &writv1.WriteError{Code: uint32(status.Code(err)), Message: status.Convert(err).Message()}}
		return out
	}
	if ms := r.GetDeadlineMs(); ms > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(ms)*time.Millisecond)
		defer cancel()
	}
	var resp any
	if s.cfg.Intercept != nil {
		resp, err = s.cfg.Intercept(ctx, req, &grpc.UnaryServerInfo{Server: s, FullMethod: method}, h)
	} else {
		resp, err = h(ctx, req)
	}
	if err != nil {
		we := &writv1.WriteError{Code: uint32(status.Code(err)), Message: status.Convert(err).Message()}
		if d, ok := OutcomeFromError(err); ok {
			we.Detail = d
		}
		out.Reply = &writv1.WriteResponse_Error{Error: we}
		return out
	}
	switch v := resp.(type) {
	case *writv1.SubmitResponse:
		out.Reply = &writv1.WriteResponse_Submit{Submit: v}
	case *writv1.ReportResponse:
		out.Reply = &writv1.WriteResponse_Report{Report: v}
	case *writv1.DeliverResponse:
		out.Reply = &writv1.WriteResponse_Deliver{Deliver: v}
	}
	return out
}

// Bounds of one call's own metadata (WriteRequest.metadata).
const (
	maxCallMetadata      = 16
	maxCallMetadataBytes = 8 << 10
)

// callContext is the context a call on a Write stream runs in: the
// stream's, or, when the call carries its own metadata, the stream's with
// exactly that metadata in place of the stream's, as a unary call sending
// it would have. The call is then authenticated and authorized by it alone:
// a follower forwarding many callers' writes on one stream opened with
// one caller's credentials never lends them to another.
func callContext(ctx context.Context, md []*writv1.MetadataEntry) (context.Context, error) {
	if len(md) == 0 {
		return ctx, nil
	}
	if len(md) > maxCallMetadata {
		return nil, status.Errorf(codes.InvalidArgument, "api: the call's metadata has %d entries, at most %d: send fewer", len(md), maxCallMetadata)
	}
	out := metadata.MD{}
	size := 0
	for i, e := range md {
		k := strings.ToLower(e.GetKey())
		if reason := badMetadataKey(k); reason != "" {
			return nil, status.Errorf(codes.InvalidArgument, "api: metadata[%d].key %q %s", i, e.GetKey(), reason)
		}
		if size += len(k) + len(e.GetValue()); size > maxCallMetadataBytes {
			return nil, status.Errorf(codes.InvalidArgument, "api: the call's metadata takes more than %d bytes: send less", maxCallMetadataBytes)
		}
		out[k] = append(out[k], e.GetValue())
	}
	return metadata.NewIncomingContext(ctx, out), nil
}

// badMetadataKey says what is wrong with a call metadata key ("" if
// nothing): gRPC's own keys and binary values are not a call's to set.
func badMetadataKey(k string) string {
	switch {
	case k == "":
		return "is empty: name the metadata key"
	case strings.HasPrefix(k, "grpc-") || strings.HasPrefix(k, ":"):
		return "is reserved by gRPC: a call cannot set it"
	case strings.HasSuffix(k, "-bin"):
		return "names a binary value: only text metadata can be set per call"
	}
	for _, c := range k {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return "has a character other than a-z, 0-9, -, _ and .: use a valid gRPC metadata key"
		}
	}
	return ""
}
