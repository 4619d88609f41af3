package pipeline_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/writ-dev/writ/examples/jobs/jobsgen"
	"github.com/writ-dev/writ/kv"
	"github.com/writ-dev/writ/pipeline"
	"github.com/writ-dev/writ/pipeline/pipelinetest"
)

func newFenceHarness(t *testing.T) *pipelinetest.Harness {
	t.Helper()
	h, err := pipelinetest.NewHarness(t.TempDir(), jobsgen.Catalog())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.P.Stop() })
	return h
}

func submitJob(id, job string) pipeline.Entry {
	return pipeline.Entry{Type: "job.submit", ID: id, Payload: []byte(`{"job_id":"` + job + `","queue":"q1","priority":1,"command":"x"}`)}
}

// timeOut submits a request, proposes it and lets its commit timeout pass:
// the requester is answered UNCERTAIN and the proposer proposes a fence
// behind the request's own proposal.
func timeOut(t *testing.T, h *pipelinetest.Harness, en pipeline.Entry) {
	t.Helper()
	ctx := context.Background()
	hd := h.P.SubmitAsync(ctx, en)
	h.P.Flush(ctx)
	if h.Log.Pending() != 1 {
		t.Fatalf("want the request proposed, have %d pending", h.Log.Pending())
	}
	h.Clock.Advance(6 * time.Second)
	h.P.Tick()
	<-hd.Done()
	if o := hd.Outcome(); o.Status != pipeline.StatusUncertain {
		t.Fatalf("after the commit timeout: want UNCERTAIN, have %s", o)
	}
	if h.Log.Pending() != 2 {
		t.Fatalf("want the request and its fence pending, have %d", h.Log.Pending())
	}
	if o, ok := h.P.OutcomeOf(en.ID); !ok || o.Status != pipeline.StatusUncertain {
		t.Fatalf("before the fence lands: want UNCERTAIN, have %v %s", ok, o)
	}
}

func outcomeOf(t *testing.T, h *pipelinetest.Harness, id string) pipeline.Outcome {
	t.Helper()
	o, ok, err := h.P.Outcome(context.Background(), id, pipeline.OutcomeQuery{})
	if err != nil || !ok {
		t.Fatalf("outcome %s: ok=%v err=%v", id, ok, err)
	}
	return o
}

func TestFenceBeforeLateCommitIsNotCommitted_FakeLog(t *testing.T) {
	h := newFenceHarness(t)
	ctx := context.Background()
	timeOut(t, h, submitJob("r1", "j1"))
	// The request's proposal reaches the log after the fence.
	if !h.Log.Delay() {
		t.Fatal("cannot reorder")
	}
	h.Log.CommitNext() // the fence
	if o := outcomeOf(t, h, "r1"); o.Status != pipeline.StatusNotCommitted || o.Index != 1 {
		t.Fatalf("after the fence: want NOT_COMMITTED at index 1, have %s", o)
	}
	h.Log.CommitNext() // the late request: refused at apply
	if _, ok, _ := h.Log.Get(ctx, "job/j1", false); ok {
		t.Fatal("a command with a fenced ID changed state")
	}
	if o := outcomeOf(t, h, "r1"); o.Status != pipeline.StatusNotCommitted || o.Index != 1 {
		t.Fatalf("after the late commit: want NOT_COMMITTED at index 1, have %s", o)
	}
	// A retry with the fenced ID is answered NOT_COMMITTED, without a
	// proposal; a new ID commits.
	hd := h.P.SubmitAsync(ctx, submitJob("r1", "j1"))
	h.P.Flush(ctx)
	if h.Log.Pending() != 0 {
		t.Fatalf("a retry of a fenced ID was proposed (%d pending)", h.Log.Pending())
	}
	select {
	case <-hd.Done():
	default:
		t.Fatal("a retry of a fenced ID was not answered at once")
	}
	if o := hd.Outcome(); o.Status != pipeline.StatusNotCommitted || !strings.Contains(o.Reason, "new request ID") {
		t.Fatalf("retry of a fenced ID: want NOT_COMMITTED naming the fix, have %s", o)
	}
	hd = h.P.SubmitAsync(ctx, submitJob("r1b", "j1"))
	h.Drain()
	if o := hd.Outcome(); o.Status != pipeline.StatusCommitted {
		t.Fatalf("the same operation with a new ID: want COMMITTED, have %s", o)
	}
}

func TestFenceAfterCommitIsCommitted_FakeLog(t *testing.T) {
	h := newFenceHarness(t)
	ctx := context.Background()
	timeOut(t, h, submitJob("r1", "j1"))
	h.Log.CommitNext() // the request
	h.Log.CommitNext() // the fence: a duplicate
	if o := outcomeOf(t, h, "r1"); o.Status != pipeline.StatusCommitted || o.Index != 1 {
		t.Fatalf("want COMMITTED at index 1, have %s", o)
	}
	if _, ok, _ := h.Log.Get(ctx, "job/j1", false); !ok {
		t.Fatal("the committed request's state is missing")
	}
	// Nothing is left to fence: no further proposal after a long time.
	h.Clock.Advance(time.Minute)
	h.P.Tick()
	if h.Log.Pending() != 0 {
		t.Fatalf("a settled fence was proposed again (%d pending)", h.Log.Pending())
	}
}

// A fence that cannot be proposed (no leader) or whose proposal is lost is
// proposed again until it lands.
func TestFenceRetriedUntilItLands_FakeLog(t *testing.T) {
	h := newFenceHarness(t)
	ctx := context.Background()
	hd := h.P.SubmitAsync(ctx, submitJob("r1", "j1"))
	h.P.Flush(ctx)
	h.Log.Lose() // the request's proposal is lost
	h.Log.SetLeader(false)
	h.Clock.Advance(6 * time.Second)
	h.P.Tick()
	<-hd.Done()
	if o := hd.Outcome(); o.Status != pipeline.StatusUncertain {
		t.Fatalf("want UNCERTAIN, have %s", o)
	}
	if h.Log.Pending() != 0 {
		t.Fatal("proposed without a leader")
	}
	h.Log.SetLeader(true)
	h.Clock.Advance(time.Second) // RetryMin
	h.P.Tick()
	if h.Log.Pending() != 1 {
		t.Fatalf("want the fence proposed once there is a leader, have %d pending", h.Log.Pending())
	}
	h.Log.Lose() // and the fence's own proposal is lost too
	h.Clock.Advance(6 * time.Second)
	h.P.Tick()
	if h.Log.Pending() != 1 {
		t.Fatalf("want the lost fence proposed again, have %d pending", h.Log.Pending())
	}
	h.Log.CommitNext()
	if o := outcomeOf(t, h, "r1"); o.Status != pipeline.StatusNotCommitted {
		t.Fatalf("want NOT_COMMITTED, have %s", o)
	}
}

// Settle makes an ID that nobody here knows definite (its proposer died).
func TestSettleFencesAnUnknownID_FakeLog(t *testing.T) {
	h := newFenceHarness(t)
	ctx := context.Background()
	if _, ok := h.P.OutcomeOf("lost"); ok {
		t.Fatal("an unknown ID has an outcome")
	}
	done := make(chan struct{})
	var o pipeline.Outcome
	var ok bool
	var err error
	go func() {
		defer close(done)
		o, ok, err = h.P.Outcome(ctx, "lost", pipeline.OutcomeQuery{Settle: true})
	}()
	deadline := time.Now().Add(5 * time.Second)
	for h.Log.Pending() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("settle proposed no fence")
		}
		time.Sleep(time.Millisecond)
	}
	h.Log.CommitNext()
	<-done
	if err != nil || !ok || o.Status != pipeline.StatusNotCommitted {
		t.Fatalf("settle: want NOT_COMMITTED, have ok=%v err=%v %s", ok, err, o)
	}
}

func TestRequestIDReusedWithDifferentPayload_FakeLog(t *testing.T) {
	h := newFenceHarness(t)
	ctx := context.Background()
	hd := h.P.SubmitAsync(ctx, submitJob("r1", "j1"))
	h.Drain()
	if o := hd.Outcome(); o.Status != pipeline.StatusCommitted {
		t.Fatalf("first: %s", o)
	}
	// Same ID, same payload: the first result.
	hd = h.P.SubmitAsync(ctx, submitJob("r1", "j1"))
	h.Drain()
	if o := hd.Outcome(); o.Status != pipeline.StatusCommitted || !o.Duplicate || o.Index != 1 {
		t.Fatalf("retry: want COMMITTED duplicate at 1, have %s", o)
	}
	// Same ID, other payload: REJECTED, nothing applied.
	hd = h.P.SubmitAsync(ctx, submitJob("r1", "j2"))
	h.Drain()
	if o := hd.Outcome(); o.Status != pipeline.StatusRejected || o.Field != "request_id" || o.Rule != "idempotency" ||
		!strings.Contains(o.Reason, "request ID reused with a different payload") {
		t.Fatalf("reuse: want REJECTED request_id/idempotency, have %s", o)
	}
	if _, ok, _ := h.Log.Get(ctx, "job/j2", false); ok {
		t.Fatal("the reused ID's payload was applied")
	}
	// The refusal is not the ID's outcome: the node still answers the
	// first payload's, with the details of its reply.
	if o, ok := h.P.OutcomeOf("r1"); !ok || o.Status != pipeline.StatusCommitted || o.Index != 1 || o.Type != "job.submit" {
		t.Fatalf("Outcome(r1) after the reuse: want COMMITTED job.submit at 1, have ok=%v %s (type %q)", ok, o, o.Type)
	}
	// The digest covers the bytes as sent: another spelling of the same
	// document is another payload (docs/pipeline.md, "Payload digests").
	hd = h.P.SubmitAsync(ctx, pipeline.Entry{Type: "job.submit", ID: "r1", Payload: []byte(`{ "job_id":"j1","queue":"q1","priority":1,"command":"x"}`)})
	h.Drain()
	if o := hd.Outcome(); o.Status != pipeline.StatusRejected || o.Rule != "idempotency" || o.Index != 1 {
		t.Fatalf("another spelling: want REJECTED naming index 1, have %s", o)
	}
	// In flight with another payload: refused at ingress.
	hd = h.P.SubmitAsync(ctx, submitJob("r2", "j3"))
	h.P.Flush(ctx)
	hd2 := h.P.SubmitAsync(ctx, submitJob("r2", "j4"))
	<-hd2.Done()
	if o := hd2.Outcome(); o.Status != pipeline.StatusRejected || o.Rule != "idempotency" {
		t.Fatalf("reuse in flight: want REJECTED, have %s", o)
	}
	h.Drain()
	if o := hd.Outcome(); o.Status != pipeline.StatusCommitted {
		t.Fatalf("the first r2: %s", o)
	}
}

// Another node's attempt with the same ID and another payload applies
// first: the live attempt here learns of it from the apply result.
func TestRequestIDReusedAcrossNodesRejectedAtApply_FakeLog(t *testing.T) {
	h := newFenceHarness(t)
	ctx := context.Background()
	if _, err := h.Log.Propose(ctx, []kv.Command{{ID: "req:r1", Type: "job.submit", Payload: []byte(`{"job_id":"other","queue":"q9","priority":1,"command":"x"}`), Origin: "n2"}}); err != nil {
		t.Fatal(err)
	}
	hd := h.P.SubmitAsync(ctx, submitJob("r1", "j1"))
	h.P.Flush(ctx)
	h.Drain()
	if o := hd.Outcome(); o.Status != pipeline.StatusRejected || o.Rule != "idempotency" || o.Index != 1 {
		t.Fatalf("want REJECTED naming the first application at 1, have %s", o)
	}
	if _, ok, _ := h.Log.Get(ctx, "job/j1", false); ok {
		t.Fatal("the reused ID's payload was applied")
	}
}

// A retry arrives on a node that has not yet applied the first attempt
// (made on another node); this node proposes it again, and the first
// attempt's application answers it. The answer is the first application's
// and says Duplicate: this submission is not the one that applied it.
func TestRetryAnsweredByAnotherNodesAttemptIsDuplicate_FakeLog(t *testing.T) {
	h := newFenceHarness(t)
	ctx := context.Background()
	first := submitJob("r1", "j1")
	if _, err := h.Log.Propose(ctx, []kv.Command{{ID: "req:r1", Type: first.Type, Payload: first.Payload, Origin: "n2"}}); err != nil {
		t.Fatal(err)
	}
	hd := h.P.SubmitAsync(ctx, submitJob("r1", "j1"))
	h.P.Flush(ctx)
	h.Drain()
	if o := hd.Outcome(); o.Status != pipeline.StatusCommitted || o.Index != 1 || !o.Duplicate {
		t.Fatalf("want COMMITTED at the first application (1) and Duplicate, have %s", o)
	}
	hd = h.P.SubmitAsync(ctx, submitJob("r1", "j1"))
	h.P.Flush(ctx)
	h.Drain()
	if o := hd.Outcome(); o.Status != pipeline.StatusCommitted || o.Index != 1 || !o.Duplicate {
		t.Fatalf("a later retry: want COMMITTED index 1 Duplicate, have %s", o)
	}
}

func stateReport(id, state string, seq int) pipeline.Entry {
	return pipeline.Entry{Type: "job.state_report", Payload: []byte(`{"report_id":"` + id + `","job_id":"j1","state":"` + state + `","seq":` + string(rune('0'+seq)) + `,"worker_id":"w1"}`)}
}

func TestFactIDReusedWithDifferentPayload_FakeLog(t *testing.T) {
	h := newFenceHarness(t)
	ctx := context.Background()
	hd := h.P.SubmitAsync(ctx, submitJob("r1", "j1"))
	h.Drain()
	<-hd.Done()
	if a := h.P.Report(ctx, stateReport("s1", "RUNNING", 1)); !a.Received {
		t.Fatalf("first report: %+v", a)
	}
	// Retained in the outbox: another payload is refused before it is
	// acknowledged.
	if a := h.P.Report(ctx, stateReport("s1", "FAILED", 2)); a.Received || a.Status != pipeline.StatusRejected || a.Rule != "idempotency" ||
		!strings.Contains(a.Reason, "fact ID reused with a different payload") {
		t.Fatalf("reuse while retained: want refused, have %+v", a)
	}
	h.Drain()
	// Committed: the same again.
	if a := h.P.Report(ctx, stateReport("s1", "FAILED", 2)); a.Received || a.Status != pipeline.StatusRejected {
		t.Fatalf("reuse after commit: want refused, have %+v", a)
	}
	// The same fact again is a harmless duplicate.
	if a := h.P.Report(ctx, stateReport("s1", "RUNNING", 1)); !a.Received {
		t.Fatalf("same fact again: %+v", a)
	}
	h.Drain()
	r, ok := h.Log.Outcome("fact:job.state_report:s1")
	if !ok || r.Digest != kv.PayloadDigest(stateReport("s1", "RUNNING", 1).Payload) {
		t.Fatalf("want the first report recorded with its digest, have %v %+v", ok, r)
	}
}

// A node that installs a snapshot hears of the entries it covers only as
// Restored: its own earlier answers (UNCERTAIN, UNAVAILABLE) must give way
// to what the restored table holds.
func TestOutcomeAfterSnapshotInstallAnswersFromTheTable_FakeLog(t *testing.T) {
	h := newFenceHarness(t)
	ctx := context.Background()
	timeOut(t, h, submitJob("r1", "j1"))
	h.Log.CommitSilently() // r1, inside a snapshot
	if o := outcomeOf(t, h, "r1"); o.Status != pipeline.StatusCommitted || o.Index != 1 {
		t.Fatalf("r1 after the snapshot: want COMMITTED at 1, have %s", o)
	}
	h.Log.CommitSilently() // its fence: a duplicate
	if o := outcomeOf(t, h, "r1"); o.Status != pipeline.StatusCommitted || o.Index != 1 {
		t.Fatalf("r1 after its fence: want COMMITTED at 1, have %s", o)
	}

	h.Log.SetLeader(false)
	hd := h.P.SubmitAsync(ctx, submitJob("r2", "j2"))
	h.P.Flush(ctx)
	<-hd.Done()
	if o := hd.Outcome(); o.Status != pipeline.StatusUnavailable {
		t.Fatalf("r2 without a leader: %s", o)
	}
	h.Log.SetLeader(true)
	// Another node's retry of r2 commits; this node learns it by snapshot.
	if _, err := h.Log.Propose(ctx, []kv.Command{{ID: "req:r2", Type: "job.submit", Payload: submitJob("r2", "j2").Payload, Origin: "n2"}}); err != nil {
		t.Fatal(err)
	}
	h.Log.CommitSilently()
	if o := outcomeOf(t, h, "r2"); o.Status != pipeline.StatusCommitted || o.Index != 3 {
		t.Fatalf("r2 committed elsewhere: want COMMITTED at 3, have %s", o)
	}
}
