package client_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/api/writv1"
	"github.com/writ-dev/writ/client"
)

// fakeNode answers Status with its view of the leader and Submit with
// COMMITTED when it is the leader, else UNAVAILABLE naming the leader (as a
// follower that cannot forward does). It records the IDs and tokens it
// saw.
type fakeNode struct {
	writv1.UnimplementedWritServer
	addr      string
	leader    func() string
	statusLie atomic.Bool // Status says "no leader known"

	mu     sync.Mutex
	ids    []string
	tokens []string
}

func (f *fakeNode) Status(ctx context.Context, _ *writv1.StatusRequest) (*writv1.StatusResponse, error) {
	l := f.leader()
	if f.statusLie.Load() {
		l = ""
	}
	return &writv1.StatusResponse{IsLeader: l == f.addr, LeaderApi: l, ApiAddr: f.addr}, nil
}

func (f *fakeNode) Submit(ctx context.Context, r *writv1.SubmitRequest) (*writv1.SubmitResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	f.mu.Lock()
	f.ids = append(f.ids, r.Entry.Id)
	f.tokens = append(f.tokens, md.Get("authorization")...)
	f.mu.Unlock()
	if l := f.leader(); l != f.addr {
		return nil, api.StatusError(&api.Error{Outcome: api.Unavailable, ID: r.Entry.Id, Reason: "not the leader", LeaderAPI: l})
	}
	return &writv1.SubmitResponse{Outcome: writv1.Outcome_COMMITTED, RequestId: r.Entry.Id, Index: 7, ServedBy: f.addr}, nil
}

func (f *fakeNode) seen() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.ids...)
}

// TestLeaderPreference_FakeServer: the client learns the leader from a
// follower's UNAVAILABLE (its leader_api) and from Status, sends submits
// straight to it rather than to the next endpoint in its list, keeps the
// request ID across the hop, and sends its token with every call.
func TestLeaderPreference_FakeServer(t *testing.T) {
	a, c, b := "127.0.44.22:7070", "127.0.44.24:7070", "127.0.44.23:7070"
	leader := func() string { return b }
	fa := &fakeNode{addr: a, leader: leader}
	fc := &fakeNode{addr: c, leader: leader}
	fb := &fakeNode{addr: b, leader: leader}
	fa.statusLie.Store(true)
	fc.statusLie.Store(true)
	serveFake(t, a, fa)
	serveFake(t, c, fc)
	serveFake(t, b, fb)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	// A's Status knows no leader: the first submit goes to A, whose
	// UNAVAILABLE names B; the client goes to B (not to C, next in the
	// list) with the same ID.
	cl, err := client.New(client.Config{Endpoints: []string{a, c, b}, Token: "s3cret", InsecureToken: true, RequestTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	o, err := cl.Submit(ctx, "t", []byte(`{}`))
	if err != nil || o.Status != client.Committed || o.Endpoint != b || o.Attempts != 2 {
		t.Fatalf("first submit: %+v %v", o, err)
	}
	if sa, sc, sb := fa.seen(), fc.seen(), fb.seen(); len(sa) != 1 || len(sc) != 0 || len(sb) != 1 || sa[0] != o.RequestID || sb[0] != o.RequestID {
		t.Fatalf("first submit: A saw %v, C %v, B %v; want %s on A then B", sa, sc, sb, o.RequestID)
	}
	for range 3 {
		if o, err := cl.Submit(ctx, "t", []byte(`{}`)); err != nil || o.Endpoint != b || o.Attempts != 1 {
			t.Fatalf("later submit: %+v %v", o, err)
		}
	}

	// A Status that names the leader sends even the first submit there.
	fa.statusLie.Store(false)
	cl2, err := client.New(client.Config{Endpoints: []string{a, b}, RequestTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cl2.Close()
	if o, err := cl2.Submit(ctx, "t", []byte(`{}`)); err != nil || o.Endpoint != b || o.Attempts != 1 || len(fa.seen()) != 1 {
		t.Fatalf("submit after a Status naming the leader: %+v %v; A saw %v", o, err, fa.seen())
	}

	fb.mu.Lock()
	defer fb.mu.Unlock()
	if len(fb.tokens) != 4 {
		t.Fatalf("B saw %d tokens for the first client's 4 submits", len(fb.tokens))
	}
	for _, tok := range fb.tokens {
		if tok != "Bearer s3cret" {
			t.Fatalf("authorization %q, want Bearer s3cret", tok)
		}
	}
}
