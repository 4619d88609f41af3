package api

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	rpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	"github.com/writ-dev/writ/api/writv1"
	"github.com/writ-dev/writ/internal/depcheck"
	"github.com/writ-dev/writ/kv"
)

// fakeNode is an in-memory backend used only by tests named *_Fake*.
type fakeNode struct {
	mu        sync.Mutex
	id        string
	leader    bool
	leaderAPI string
	apiAddr   string
	submitted []Entry
	outcome   Outcome
	discard   bool // benchmarks: do not retain submitted entries
	lastQuery OutcomeQuery
}

func (f *fakeNode) Submit(_ context.Context, e Entry, _ time.Duration) SubmitResult {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.discard {
		return SubmitResult{Outcome: Committed, ID: e.ID, Index: 1}
	}
	f.submitted = append(f.submitted, e)
	switch f.outcome {
	case Rejected:
		return SubmitResult{Outcome: Rejected, ID: e.ID, Reason: "job_id: must match ^[a-z0-9-]+$", Field: "job_id"}
	case Unavailable:
		return SubmitResult{Outcome: Unavailable, ID: e.ID, Reason: "no leader"}
	case Uncertain:
		return SubmitResult{Outcome: Uncertain, ID: e.ID, Reason: "not committed within 5s"}
	}
	return SubmitResult{Outcome: Committed, ID: e.ID, Index: uint64(len(f.submitted))}
}
func (f *fakeNode) Report(_ context.Context, e Entry) (ReportResult, error) {
	if e.Type == "down" {
		return ReportResult{}, &Error{Outcome: Unavailable, Reason: "outbox closed"}
	}
	return ReportResult{ID: e.ID, OutboxDepth: 1}, nil
}
func (f *fakeNode) Deliver(_ context.Context, e Entry) (DeliverResult, error) {
	return DeliverResult{ID: e.ID, ItemIDs: []string{"a", "b"}}, nil
}
func (f *fakeNode) Outcome(_ context.Context, q OutcomeQuery) (OutcomeResult, bool, error) {
	f.mu.Lock()
	f.lastQuery = q
	f.mu.Unlock()
	if q.ID == "fenced" {
		return OutcomeResult{Outcome: NotCommitted, Index: 9, Status: "not_committed"}, true, nil
	}
	if q.ID == "known" {
		return OutcomeResult{Outcome: Committed, Index: 7, Status: "applied"}, true, nil
	}
	return OutcomeResult{}, false, nil
}
func (f *fakeNode) Watch(ctx context.Context, w WatchFilter, send func(WatchEvent) error) error {
	for i := w.From; i < w.From+3; i++ {
		if err := send(WatchEvent{Index: i, Type: "job.submit"}); err != nil {
			return err
		}
	}
	<-ctx.Done()
	return ctx.Err()
}
func (f *fakeNode) Conflicts(context.Context) ([]kv.Record, error) {
	return []kv.Record{{Key: "_conflict/job/a", Value: []byte(`{"reason":"terminal"}`), Rev: 3}}, nil
}
func (f *fakeNode) Outbox(context.Context) (OutboxInfo, error) { return OutboxInfo{Depth: 2}, nil }
func (f *fakeNode) ConfigShow(context.Context) (ConfigState, error) {
	return ConfigState{Tag: "v1"}, nil
}
func (f *fakeNode) ConfigUpgrade(_ context.Context, c ConfigChange, p func(ConfigProgress)) (ConfigProgress, error) {
	p(ConfigProgress{Phase: writv1.ConfigProgress_STAGED})
	return ConfigProgress{Phase: writv1.ConfigProgress_ACTIVATED, Tag: "v2", Outcome: Committed}, nil
}
func (f *fakeNode) Get(_ context.Context, key string, _ bool) (kv.Record, bool, error) {
	if key == "job/a" {
		return kv.Record{Key: key, Value: []byte("{}"), Rev: 2}, true, nil
	}
	return kv.Record{}, false, nil
}
func (f *fakeNode) List(context.Context, string, bool) ([]kv.Record, error) {
	return nil, errors.New("no quorum")
}
func (f *fakeNode) Status(context.Context) NodeStatus {
	f.mu.Lock()
	defer f.mu.Unlock()
	return NodeStatus{Log: kv.LogStatus{NodeID: f.id, IsLeader: f.leader}, LeaderAPI: f.leaderAPI, APIAddr: f.apiAddr, Ready: true, Health: "ok"}
}
func (f *fakeNode) Route(context.Context) Route {
	f.mu.Lock()
	defer f.mu.Unlock()
	return Route{NodeID: f.id, IsLeader: f.leader, LeaderAPI: f.leaderAPI, APIAddr: f.apiAddr}
}
func (f *fakeNode) Members(context.Context) []MemberInfo { return []MemberInfo{{ID: f.id}} }
func (f *fakeNode) Plugins(context.Context) []PluginInfo { return nil }

func serveFakeB(b *testing.B) writv1.WritClient {
	b.Helper()
	lis, err := net.Listen("tcp", "127.0.3.7:0")
	if err != nil {
		b.Fatal(err)
	}
	f := &fakeNode{id: "n1", leader: true, discard: true, apiAddr: lis.Addr().String()}
	s, err := New(Config{Writer: f, Store: f, Info: f})
	if err != nil {
		b.Fatal(err)
	}
	g := grpc.NewServer()
	s.Register(g)
	go func() { _ = g.Serve(lis) }()
	b.Cleanup(func() { g.Stop(); s.Close() })
	c, err := grpc.NewClient(f.apiAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Close() })
	return writv1.NewWritClient(c)
}

func serveFake(t *testing.T, addr string, f *fakeNode) writv1.WritClient {
	t.Helper()
	_, c, _ := serveStreamFake(t, addr, Config{Reflection: true}, f)
	return c
}

func TestServer_FakeBackendOutcomes(t *testing.T) {
	f := &fakeNode{id: "n1", leader: true}
	c := serveFake(t, "127.0.3.1:0", f)
	ctx := context.Background()
	r, err := c.Submit(ctx, &writv1.SubmitRequest{Entry: &writv1.Entry{Type: "job.submit", Payload: []byte(`{}`)}})
	if err != nil || r.Outcome != Committed || !strings.HasPrefix(r.RequestId, "r-") || r.ServedBy != "n1" {
		t.Fatalf("submit: %v %v", r, err)
	}
	for _, tc := range []struct {
		o    Outcome
		code codes.Code
	}{{Rejected, codes.InvalidArgument}, {Unavailable, codes.Unavailable}, {Uncertain, codes.DeadlineExceeded}} {
		f.outcome = tc.o
		_, err := c.Submit(ctx, &writv1.SubmitRequest{Entry: &writv1.Entry{Type: "job.submit", Id: "req-1", Payload: []byte(`{}`)}})
		d, ok := OutcomeFromError(err)
		if !ok || d.Outcome != tc.o || d.RequestId != "req-1" || status.Code(err) != tc.code {
			t.Fatalf("outcome %s: err=%v detail=%v", tc.o, err, d)
		}
	}
	f.outcome = Committed
	// bad input is REJECTED naming the field, nothing reaches the backend.
	n := len(f.submitted)
	for _, e := range []*writv1.Entry{nil, {Payload: []byte("{}")}, {Type: "x", Payload: make([]byte, MaxPayload+1)}} {
		_, err := c.Submit(ctx, &writv1.SubmitRequest{Entry: e})
		d, ok := OutcomeFromError(err)
		if !ok || d.Outcome != Rejected || d.Field == "" {
			t.Fatalf("bad entry %v: %v", e, err)
		}
	}
	if len(f.submitted) != n {
		t.Fatal("rejected input reached the write path")
	}
	if _, err := c.Report(ctx, &writv1.ReportRequest{Entry: &writv1.Entry{Type: "down", Payload: []byte("{}")}}); status.Code(err) != codes.Unavailable {
		t.Fatalf("report error mapping: %v", err)
	}
	rr, err := c.Report(ctx, &writv1.ReportRequest{Entry: &writv1.Entry{Type: "job.state_report", Payload: []byte("{}")}})
	if err != nil || !rr.Received {
		t.Fatalf("report: %v %v", rr, err)
	}
	if _, err := c.List(ctx, &writv1.ListRequest{}); status.Code(err) != codes.Unavailable {
		t.Fatalf("list error: %v", err)
	}
	g, err := c.Get(ctx, &writv1.GetRequest{Key: "job/a"})
	if err != nil || !g.Found || g.Record.Rev != 2 {
		t.Fatalf("get: %v %v", g, err)
	}
	o, err := c.Outcome(ctx, &writv1.OutcomeRequest{RequestId: "known"})
	if err != nil || !o.Known || o.Index != 7 {
		t.Fatalf("outcome: %v %v", o, err)
	}
	if o, err := c.Outcome(ctx, &writv1.OutcomeRequest{RequestId: "fenced", Serializable: true, Settle: true}); err != nil || o.Outcome != writv1.Outcome_NOT_COMMITTED || o.Index != 9 {
		t.Fatalf("outcome of a fenced ID: %v %v", o, err)
	}
	f.mu.Lock()
	if q := f.lastQuery; q != (OutcomeQuery{ID: "fenced", Serializable: true, Settle: true}) {
		t.Fatalf("the lookup's flags did not reach the writer: %+v", q)
	}
	f.mu.Unlock()
	if err := StatusError(&Error{Outcome: NotCommitted, ID: "r", Reason: "fenced"}); status.Code(err) != codes.Aborted {
		t.Fatalf("NOT_COMMITTED maps to %v, want Aborted", status.Code(err))
	}
	wctx, cancel := context.WithCancel(ctx)
	ws, err := c.Watch(wctx, &writv1.WatchRequest{FromIndex: 10})
	if err != nil {
		t.Fatal(err)
	}
	for i := uint64(10); i < 13; i++ {
		ev, err := ws.Recv()
		if err != nil || ev.Index != i {
			t.Fatalf("watch event %d: %v %v", i, ev, err)
		}
	}
	cancel()
	cs, err := c.ConfigUpgrade(ctx, &writv1.ConfigUpgradeRequest{Document: []byte("tag: v2\n")})
	if err != nil {
		t.Fatal(err)
	}
	var phases []string
	for {
		p, err := cs.Recv()
		if err != nil {
			break
		}
		phases = append(phases, p.Phase.String())
	}
	if strings.Join(phases, ",") != "STAGED,ACTIVATED" {
		t.Fatalf("config phases %v", phases)
	}
}

func TestServer_FakeBackendForwardsToLeader(t *testing.T) {
	leader := &fakeNode{id: "n1", leader: true}
	serveFake(t, "127.0.3.2:0", leader)
	follower := &fakeNode{id: "n2", leaderAPI: leader.apiAddr}
	c := serveFake(t, "127.0.3.3:0", follower)
	r, err := c.Submit(context.Background(), &writv1.SubmitRequest{Entry: &writv1.Entry{Type: "job.submit", Payload: []byte(`{}`)}})
	if err != nil || r.ServedBy != "n1" {
		t.Fatalf("not forwarded: %v %v", r, err)
	}
	if len(follower.submitted) != 0 || len(leader.submitted) != 1 || leader.submitted[0].ID != r.RequestId {
		t.Fatalf("leader got %v, follower got %v", leader.submitted, follower.submitted)
	}
	// leader gone: the follower processes locally with the same request ID.
	follower.mu.Lock()
	follower.leaderAPI = "127.0.3.4:1"
	follower.mu.Unlock()
	r, err = c.Submit(context.Background(), &writv1.SubmitRequest{Entry: &writv1.Entry{Type: "job.submit", Id: "same", Payload: []byte(`{}`)}})
	if err != nil || r.ServedBy != "n2" || follower.submitted[0].ID != "same" {
		t.Fatalf("local fallback: %v %v", r, err)
	}
}

func TestServer_FakeBackendReflection(t *testing.T) {
	f := &fakeNode{id: "n9", leader: true}
	serveFake(t, "127.0.3.6:0", f)
	conn, err := grpc.NewClient(f.apiAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rs, err := rpb.NewServerReflectionClient(conn).ServerReflectionInfo(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := rs.Send(&rpb.ServerReflectionRequest{MessageRequest: &rpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	resp, err := rs.Recv()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, s := range resp.GetListServicesResponse().GetService() {
		if s.GetName() == "writ.v1.Writ" {
			found = true
		}
	}
	if !found {
		t.Fatalf("writ.v1.Writ not listed by reflection: %v", resp)
	}
}

func TestImportRules(t *testing.T) {
	depcheck.Forbid(t, "github.com/writ-dev/writ/api",
		"github.com/writ-dev/writ/raftstore", "github.com/writ-dev/writ/membership",
		"github.com/writ-dev/writ/plugins/host", "github.com/spf13/viper", "go.etcd.io", "github.com/hashicorp/serf")
}
