package api

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/writ-dev/writ/api/writv1"
)

// hangingLeader accepts a forwarded Submit and never answers it: the test
// then kills its server, as a leader SIGKILLed after the request reached it.
type hangingLeader struct {
	writv1.UnimplementedWritServer
	arrived chan struct{}
}

func (h *hangingLeader) Submit(ctx context.Context, _ *writv1.SubmitRequest) (*writv1.SubmitResponse, error) {
	close(h.arrived)
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestServer_FakeBackendForwardLostAfterSendIsUncertain: a follower that
// forwarded a Submit to a leader which died before answering, and then
// finds no leader itself, answers UNCERTAIN (the dead leader may have
// appended the request, and the next leader can commit it), never
// UNAVAILABLE "not appended". A leader that could not be reached at all
// leaves UNAVAILABLE definite.
func TestServer_FakeBackendForwardLostAfterSendIsUncertain(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.24.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &hangingLeader{arrived: make(chan struct{})}
	g := grpc.NewServer()
	writv1.RegisterWritServer(g, h)
	go func() { _ = g.Serve(lis) }()
	defer g.Stop()
	go func() {
		<-h.arrived
		g.Stop() // the leader dies with the request in hand
	}()

	follower := &fakeNode{id: "n2", leaderAPI: lis.Addr().String(), outcome: Unavailable}
	c := serveFake(t, "127.0.24.2:0", follower)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err = c.Submit(ctx, &writv1.SubmitRequest{Entry: &writv1.Entry{Type: "job.submit", Id: "r-sent", Payload: []byte(`{}`)}})
	o, ok := OutcomeFromError(err)
	if !ok || o.Outcome != Uncertain {
		t.Fatalf("forward lost after it reached the leader: got %v (%v), want UNCERTAIN", o.Outcome, err)
	}
	if !strings.Contains(o.Reason, "may have appended") {
		t.Errorf("UNCERTAIN reason does not say why: %q", o.Reason)
	}

	// Nothing listens at the leader's address: the request never left.
	dead, err := net.Listen("tcp", "127.0.24.3:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := dead.Addr().String()
	dead.Close()
	follower2 := &fakeNode{id: "n3", leaderAPI: deadAddr, outcome: Unavailable}
	c2 := serveFake(t, "127.0.24.4:0", follower2)
	_, err = c2.Submit(ctx, &writv1.SubmitRequest{Entry: &writv1.Entry{Type: "job.submit", Id: "r-unsent", Payload: []byte(`{}`)}})
	if o, ok := OutcomeFromError(err); !ok || o.Outcome != Unavailable {
		t.Fatalf("leader unreachable: got %v (%v), want UNAVAILABLE", o.Outcome, err)
	}
}

// TestServer_FakeBackendForwardsOnlyOnce: a call is forwarded at most once.
// Two followers that each name the other as leader (a stale route during
// an election) must not bounce a request between them: the one that
// receives the forwarded call runs it itself. The leader runs its calls
// whether they were forwarded or not (TestServer_FakeBackendForwardsToLeader).
// Loopback addresses: 127.0.93.1–127.0.93.2.
func TestServer_FakeBackendForwardsOnlyOnce(t *testing.T) {
	a := &fakeNode{id: "a"}
	b := &fakeNode{id: "b"}
	ca := serveFake(t, "127.0.93.1:0", a)
	cb := serveFake(t, "127.0.93.2:0", b)
	a.mu.Lock()
	a.leaderAPI = b.apiAddr
	a.mu.Unlock()
	b.mu.Lock()
	b.leaderAPI = a.apiAddr
	b.mu.Unlock()
	for _, tc := range []struct {
		c      writv1.WritClient
		via    string
		served string
	}{{ca, "a", "b"}, {cb, "b", "a"}} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		r, err := tc.c.Submit(ctx, &writv1.SubmitRequest{Entry: &writv1.Entry{Type: "job.submit", Id: "via-" + tc.via, Payload: []byte(`{}`)}})
		cancel()
		if err != nil || r.ServedBy != tc.served {
			t.Fatalf("submit via %s: served by %q, want %q (forwarded once): %v", tc.via, r.GetServedBy(), tc.served, err)
		}
	}
	if len(a.submitted) != 1 || len(b.submitted) != 1 {
		t.Fatalf("a ran %d, b ran %d submits; want one each", len(a.submitted), len(b.submitted))
	}
}

// oldLeader is a leader from before the Write stream: unary calls only.
type oldLeader struct {
	writv1.UnimplementedWritServer
}

func (oldLeader) Submit(_ context.Context, r *writv1.SubmitRequest) (*writv1.SubmitResponse, error) {
	return &writv1.SubmitResponse{Outcome: Committed, RequestId: r.GetEntry().GetId(), ServedBy: "old"}, nil
}

func (oldLeader) Deliver(_ context.Context, r *writv1.DeliverRequest) (*writv1.DeliverResponse, error) {
	return &writv1.DeliverResponse{Received: true, RequestId: r.GetEntry().GetId()}, nil
}

// TestServer_FakeBackendForwardsUnaryToALeaderWithoutTheStream: in a
// rolling upgrade the leader may not serve the Write stream yet; a
// follower's forwards then go as unary calls and are answered as before,
// on the first call and on later ones (the follower once panicked on the
// first successful unary fallback). Loopback addresses: 127.0.24.5–6.
func TestServer_FakeBackendForwardsUnaryToALeaderWithoutTheStream(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.24.5:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	writv1.RegisterWritServer(g, oldLeader{})
	go func() { _ = g.Serve(lis) }()
	defer g.Stop()
	follower := &fakeNode{id: "n2", leaderAPI: lis.Addr().String()}
	c := serveFake(t, "127.0.24.6:0", follower)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := range 3 {
		id := fmt.Sprintf("r-old-%d", i)
		r, err := c.Submit(ctx, &writv1.SubmitRequest{Entry: &writv1.Entry{Type: "job.submit", Id: id, Payload: []byte(`{}`)}})
		if err != nil || r.GetServedBy() != "old" || r.GetRequestId() != id {
			t.Fatalf("submit %d through the follower: %v %v, want served by the old leader", i, r, err)
		}
		d, err := c.Deliver(ctx, &writv1.DeliverRequest{Entry: &writv1.Entry{Type: "job.dispatch", Id: "d-" + id, Payload: []byte(`{}`)}})
		if err != nil || !d.GetReceived() || d.GetRequestId() != "d-"+id {
			t.Fatalf("deliver %d through the follower: %v %v", i, d, err)
		}
	}
	follower.mu.Lock()
	defer follower.mu.Unlock()
	if len(follower.submitted) != 0 {
		t.Fatalf("the follower ran %d submits itself; every one should have been forwarded", len(follower.submitted))
	}
}
