package api

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/writ-dev/writ/api/writv1"
)

// gatedWriter is a fake write path (tests named *_Fake*): every Submit
// announces itself on started and waits for release.
type gatedWriter struct {
	*fakeNode
	started chan string
	release chan struct{}
	calls   atomic.Int32
}

func (g *gatedWriter) Submit(ctx context.Context, e Entry, d time.Duration) SubmitResult {
	g.calls.Add(1)
	g.started <- e.ID
	<-g.release
	return g.fakeNode.Submit(ctx, e, d)
}

// serveStreamFake serves cfg (Store and Info from f) and opens a Write
// stream; the Server is returned for Drain.
func serveStreamFake(t *testing.T, addr string, cfg Config, f *fakeNode, opts ...grpc.ServerOption) (*Server, writv1.WritClient, context.Context) {
	t.Helper()
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	f.apiAddr = lis.Addr().String()
	if cfg.Writer == nil {
		cfg.Writer = f
	}
	cfg.Store, cfg.Info = f, f
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(opts...)
	s.Register(g)
	go func() { _ = g.Serve(lis) }()
	t.Cleanup(func() { g.Stop(); s.Close() })
	c, err := grpc.NewClient(f.apiAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return s, writv1.NewWritClient(c), ctx
}

func submitCall(seq uint64, id string) *writv1.WriteRequest {
	return &writv1.WriteRequest{Seq: seq, Call: &writv1.WriteRequest_Submit{Submit: &writv1.SubmitRequest{
		Entry: &writv1.Entry{Type: "job.submit", Id: id, Payload: []byte(`{}`)}}}}
}

// answerOf is a reply as "CODE OUTCOME" or "OK kind", for comparing a
// stream's answer with the unary call's.
func answerOf(r *writv1.WriteResponse) string {
	if e := r.GetError(); e != nil {
		return fmt.Sprintf("%s %s %s", codes.Code(e.GetCode()), e.GetDetail().GetOutcome(), e.GetDetail().GetField())
	}
	return fmt.Sprintf("OK %T", r.GetReply())
}

func unaryAnswer(resp any, err error) string {
	if err != nil {
		d, _ := OutcomeFromError(err)
		return fmt.Sprintf("%s %s %s", status.Code(err), d.GetOutcome(), d.GetField())
	}
	switch resp.(type) {
	case *writv1.SubmitResponse:
		return "OK *writv1.WriteResponse_Submit"
	case *writv1.ReportResponse:
		return "OK *writv1.WriteResponse_Report"
	case *writv1.DeliverResponse:
		return "OK *writv1.WriteResponse_Deliver"
	}
	return fmt.Sprintf("OK %T", resp)
}

func TestWriteStream_FakeBackendAnswersEveryCallAsItsUnaryCall(t *testing.T) {
	f := &fakeNode{id: "n1", leader: true}
	_, c, ctx := serveStreamFake(t, "127.0.3.11:0", Config{}, f)
	big := make([]byte, MaxPayload+1)
	cases := []struct {
		name string
		call *writv1.WriteRequest
	}{
		{"submit", submitCall(0, "s1")},
		{"submit without entry", &writv1.WriteRequest{Call: &writv1.WriteRequest_Submit{Submit: &writv1.SubmitRequest{}}}},
		{"submit without type", &writv1.WriteRequest{Call: &writv1.WriteRequest_Submit{Submit: &writv1.SubmitRequest{Entry: &writv1.Entry{Payload: []byte("{}")}}}}},
		{"submit too large", &writv1.WriteRequest{Call: &writv1.WriteRequest_Submit{Submit: &writv1.SubmitRequest{Entry: &writv1.Entry{Type: "x", Payload: big}}}}},
		{"report", &writv1.WriteRequest{Call: &writv1.WriteRequest_Report{Report: &writv1.ReportRequest{Entry: &writv1.Entry{Type: "job.state_report", Id: "f1", Payload: []byte("{}")}}}}},
		{"report refused", &writv1.WriteRequest{Call: &writv1.WriteRequest_Report{Report: &writv1.ReportRequest{Entry: &writv1.Entry{Type: "down", Payload: []byte("{}")}}}}},
		{"deliver", &writv1.WriteRequest{Call: &writv1.WriteRequest_Deliver{Deliver: &writv1.DeliverRequest{Entry: &writv1.Entry{Type: "r", Id: "d1", Payload: []byte("{}")}}}}},
	}
	unary := func(r *writv1.WriteRequest) string {
		switch x := r.GetCall().(type) {
		case *writv1.WriteRequest_Submit:
			return unaryAnswer(c.Submit(ctx, x.Submit))
		case *writv1.WriteRequest_Report:
			return unaryAnswer(c.Report(ctx, x.Report))
		case *writv1.WriteRequest_Deliver:
			return unaryAnswer(c.Deliver(ctx, x.Deliver))
		}
		return "?"
	}
	for _, o := range []Outcome{Committed, Rejected, Unavailable, Uncertain} {
		f.mu.Lock()
		f.outcome = o
		f.mu.Unlock()
		ws, err := c.Write(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for i, tc := range cases {
			tc.call.Seq = uint64(100 + i)
			if err := ws.Send(tc.call); err != nil {
				t.Fatal(err)
			}
		}
		got := map[uint64]*writv1.WriteResponse{}
		for range cases {
			r, err := ws.Recv()
			if err != nil {
				t.Fatalf("outcome %s: recv: %v", o, err)
			}
			if got[r.GetSeq()] != nil {
				t.Fatalf("seq %d answered twice", r.GetSeq())
			}
			got[r.GetSeq()] = r
		}
		for i, tc := range cases {
			r := got[uint64(100+i)]
			if r == nil {
				t.Fatalf("outcome %s: %s not answered (answers %v)", o, tc.name, got)
			}
			if s, u := answerOf(r), unary(tc.call); s != u {
				t.Errorf("outcome %s: %s: stream answered %q, the unary call %q", o, tc.name, s, u)
			}
		}
		// a call naming no operation is refused with the field to set
		if err := ws.Send(&writv1.WriteRequest{Seq: 7}); err != nil {
			t.Fatal(err)
		}
		r, err := ws.Recv()
		if err != nil || r.GetSeq() != 7 || codes.Code(r.GetError().GetCode()) != codes.InvalidArgument || !strings.Contains(r.GetError().GetMessage(), "set the call field") {
			t.Fatalf("empty call: %v %v", r, err)
		}
		if err := ws.CloseSend(); err != nil {
			t.Fatal(err)
		}
		if _, err := ws.Recv(); !errors.Is(err, io.EOF) {
			t.Fatalf("after CloseSend: %v, want the stream to end cleanly", err)
		}
	}
}

func TestWriteStream_FakeBackendBoundsCallsInFlight(t *testing.T) {
	f := &fakeNode{id: "n1", leader: true}
	g := &gatedWriter{fakeNode: f, started: make(chan string, 16), release: make(chan struct{})}
	_, c, ctx := serveStreamFake(t, "127.0.3.12:0", Config{Writer: g, MaxStreamCalls: 2}, f)
	ws, err := c.Write(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if err := ws.Send(submitCall(uint64(i+1), fmt.Sprintf("r%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	<-g.started
	<-g.started
	select {
	case id := <-g.started:
		t.Fatalf("%s started while 2 calls (MaxStreamCalls) were in flight", id)
	case <-time.After(300 * time.Millisecond):
	}
	g.release <- struct{}{}
	if r, err := ws.Recv(); err != nil || r.GetSubmit() == nil {
		t.Fatalf("first answer: %v %v", r, err)
	}
	select {
	case <-g.started:
	case <-time.After(10 * time.Second):
		t.Fatal("a slot was freed but the third call did not start")
	}
	close(g.release)
	for range 4 {
		if r, err := ws.Recv(); err != nil || r.GetSubmit() == nil {
			t.Fatalf("answer: %v %v", r, err)
		}
	}
	if n := g.calls.Load(); n != 5 {
		t.Fatalf("%d calls reached the write path, want 5", n)
	}
}

func TestWriteStream_FakeBackendDrainAnswersWhatItTook(t *testing.T) {
	f := &fakeNode{id: "n1", leader: true}
	g := &gatedWriter{fakeNode: f, started: make(chan string, 16), release: make(chan struct{})}
	s, c, ctx := serveStreamFake(t, "127.0.3.13:0", Config{Writer: g, MaxStreamCalls: 2}, f)
	ws, err := c.Write(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		if err := ws.Send(submitCall(uint64(i+1), fmt.Sprintf("r%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	<-g.started
	<-g.started
	s.Drain()
	s.Drain() // idempotent
	time.Sleep(100 * time.Millisecond)
	close(g.release)
	answered := map[uint64]bool{}
	for {
		r, err := ws.Recv()
		if err != nil {
			t.Fatalf("the stream ended (%v) before its drained message; answered %v", err, answered)
		}
		if r.GetDrained() {
			break
		}
		if r.GetSubmit() == nil {
			t.Fatalf("answer %v", r)
		}
		answered[r.GetSeq()] = true
	}
	if len(answered) != 2 || g.calls.Load() != 2 {
		t.Fatalf("answered %v with %d calls processed: want exactly the 2 calls taken before the drain answered, and no other processed", answered, g.calls.Load())
	}
	if _, err := ws.Recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("after drained: %v, want the stream to end", err)
	}
	// a new stream is drained at once
	ws2, err := c.Write(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The server may end the stream before this send: gRPC then answers
	// io.EOF, and the drained message still waits in Recv.
	if err := ws2.Send(submitCall(1, "late")); err != nil && !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	if r, err := ws2.Recv(); err != nil || !r.GetDrained() {
		t.Fatalf("a stream opened after Drain: %v %v, want drained", r, err)
	}
	if g.calls.Load() != 2 {
		t.Fatal("a call sent after Drain was processed")
	}
}

func TestWriteStream_FakeBackendAuthorizesAndAuditsEachCall(t *testing.T) {
	f := &fakeNode{id: "n1", leader: true}
	tok := func(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }
	acc, err := ParseAccess(fmt.Appendf(nil, `identities:
  - {name: jobs-writer, token_sha256: %s, roles: ["write:job."]}
  - {name: reader, token_sha256: %s, roles: [read]}
`, tok("tw"), tok("tr")))
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	var logMu sync.Mutex
	a := &Auth{Enabled: true, Access: acc, Logger: slog.New(slog.NewTextHandler(&lockedWriter{w: &logs, mu: &logMu}, nil))}
	_, c, ctx := serveStreamFake(t, "127.0.3.14:0", Config{Intercept: a.Unary}, f, ServerOptions(Limits{}, a)...)

	// no credentials: the stream itself is refused
	ws, err := c.Write(ctx)
	if err == nil {
		_ = ws.Send(submitCall(1, "x"))
		_, err = ws.Recv()
	}
	if status.Code(err) != codes.Unauthenticated {
		t.Fatalf("stream without credentials: %v, want Unauthenticated", err)
	}

	// write:job. may submit job.* on the stream, not other types
	ws, err = c.Write(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer tw"))
	if err != nil {
		t.Fatal(err)
	}
	other := submitCall(2, "o1")
	other.GetSubmit().Entry.Type = "lease.acquire"
	for _, r := range []*writv1.WriteRequest{submitCall(1, "j1"), other} {
		if err := ws.Send(r); err != nil {
			t.Fatal(err)
		}
	}
	got := map[uint64]*writv1.WriteResponse{}
	for range 2 {
		r, err := ws.Recv()
		if err != nil {
			t.Fatal(err)
		}
		got[r.GetSeq()] = r
	}
	if got[1].GetSubmit() == nil {
		t.Fatalf("job.submit by write:job.: %v", got[1])
	}
	if e := got[2].GetError(); codes.Code(e.GetCode()) != codes.PermissionDenied || !strings.Contains(e.GetMessage(), "lease.acquire") {
		t.Fatalf("lease.acquire by write:job.: %v, want PermissionDenied naming the type", got[2])
	}
	// read only: the stream opens, every write on it is refused
	ws, err = c.Write(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer tr"))
	if err != nil {
		t.Fatal(err)
	}
	if err := ws.Send(submitCall(3, "j2")); err != nil {
		t.Fatal(err)
	}
	if r, err := ws.Recv(); err != nil || codes.Code(r.GetError().GetCode()) != codes.PermissionDenied {
		t.Fatalf("submit by a reader: %v %v", r, err)
	}
	f.mu.Lock()
	n := len(f.submitted)
	f.mu.Unlock()
	if n != 1 {
		t.Fatalf("%d submits reached the write path, want the permitted one", n)
	}
	logMu.Lock()
	out := logs.String()
	logMu.Unlock()
	if !strings.Contains(out, "identity=jobs-writer") || !strings.Contains(out, "method=Submit request_id=j1") {
		t.Fatalf("no audit line for the streamed submit j1:\n%s", out)
	}
}

// lockedWriter serializes writes to a shared buffer.
type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
