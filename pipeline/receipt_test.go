package pipeline_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/writ-dev/writ/examples/jobs/jobsgen"
	"github.com/writ-dev/writ/pipeline"
	"github.com/writ-dev/writ/pipeline/pipelinetest"
)

// maxID is an identifier at the schema's maximum length (#ID: 63 chars).
func maxID(prefix string, i int) string {
	s := fmt.Sprintf("%s%d-", prefix, i)
	return s + strings.Repeat("x", 63-len(s))
}

// maxDispatch is a job.dispatch at the schema's maximum: 512 items, every
// identifier at its maximum length. The first shared items address one job
// and worker (each waits for the one before it on their keys), the others a
// job and worker each.
func maxDispatch(t *testing.T, id string, shared int) []byte {
	t.Helper()
	type item struct {
		JobID    string `json:"job_id"`
		WorkerID string `json:"worker_id"`
	}
	items := make([]item, 512)
	for i := range items {
		k := i
		if i < shared {
			k = 0
		}
		items[i] = item{JobID: maxID("j", k), WorkerID: maxID("w", k)}
	}
	b, err := json.Marshal(map[string]any{"dispatch_id": id, "scheduler": maxID("s", 0), "items": items})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// watchIDs drains the watch stream: the events seen per command ID.
func watchIDs(t *testing.T, w *pipeline.Watcher, seen map[string][]pipeline.Event) {
	t.Helper()
	for {
		ev, ok, err := w.Poll()
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return
		}
		seen[ev.ID] = append(seen[ev.ID], ev)
	}
}

// TestReceiptMaxItemsEveryOutcomeOnWatch_FakeLog delivers a 512-item
// receipt whose items all address one job and one worker, so they are
// proposed one after another; each round takes 20ms of (fake) time, far
// more than the commit timeout in total. Every item must reach the log
// and its outcome the watch stream: an item's commit timeout counts from
// its own proposal, not from the receipt's arrival (W4).
func TestReceiptMaxItemsEveryOutcomeOnWatch_FakeLog(t *testing.T) {
	h, err := pipelinetest.NewHarness(t.TempDir(), jobsgen.Catalog())
	if err != nil {
		t.Fatal(err)
	}
	defer h.P.Stop()
	ctx := context.Background()
	job := fmt.Sprintf(`{"job_id":%q,"queue":"q","priority":1,"command":"x"}`, maxID("j", 0))
	hd := h.P.SubmitAsync(ctx, pipeline.Entry{Type: "job.submit", ID: "r0", Payload: []byte(job)})
	h.Drain()
	if o := hd.Outcome(); o.Status != pipeline.StatusCommitted {
		t.Fatalf("submit: %s", o)
	}
	w := h.P.Watch(h.Log.Index()+1, pipeline.Filter{})
	a := h.P.Deliver(ctx, pipeline.Entry{Type: "job.dispatch", Payload: maxDispatch(t, maxID("d", 0), 512)})
	if !a.Received || len(a.ItemIDs) != 512 {
		t.Fatalf("deliver: received=%v items=%d %s", a.Received, len(a.ItemIDs), a.Reason)
	}
	seen := map[string][]pipeline.Event{}
	missing := func() int {
		n := 0
		for _, id := range a.ItemIDs {
			if len(seen[id]) == 0 {
				n++
			}
		}
		return n
	}
	for round := 0; round < 4*len(a.ItemIDs) && missing() > 0; round++ {
		h.P.Flush(ctx)
		h.Log.CommitNext()
		h.Clock.Advance(20 * time.Millisecond)
		h.P.Tick()
		watchIDs(t, w, seen)
	}
	if n := missing(); n > 0 {
		t.Fatalf("%d of %d receipt items have no outcome on the watch stream", n, len(a.ItemIDs))
	}
	committed := 0
	for _, id := range a.ItemIDs {
		for _, ev := range seen[id] {
			switch ev.Status {
			case pipeline.StatusCommitted:
				committed++
			case pipeline.StatusRejected:
			default:
				t.Fatalf("%s: %s on a healthy log (%s): the item should have been appended", id, ev.Status, ev.Reason)
			}
		}
	}
	if committed == 0 {
		t.Fatal("no item committed: the first assignment of the submitted job must")
	}
}

// TestReceiptItemNotAppendedOnWatch_FakeLog: an item that ends without a
// log record (UNAVAILABLE: no leader; UNCERTAIN: proposed, never
// confirmed) still has its outcome, with its ID, on the watch stream; an
// UNCERTAIN item that commits later shows that too.
func TestReceiptItemNotAppendedOnWatch_FakeLog(t *testing.T) {
	h, err := pipelinetest.NewHarness(t.TempDir(), jobsgen.Catalog())
	if err != nil {
		t.Fatal(err)
	}
	defer h.P.Stop()
	ctx := context.Background()
	w := h.P.Watch(0, pipeline.Filter{})
	seen := map[string][]pipeline.Event{}

	h.Log.SetLeader(false)
	a := h.P.Deliver(ctx, pipeline.Entry{Type: "job.dispatch", Payload: []byte(`{"dispatch_id":"d1","scheduler":"s","items":[{"job_id":"j1","worker_id":"w1"},{"job_id":"j2","worker_id":"w2"}]}`)})
	if !a.Received || len(a.ItemIDs) != 2 {
		t.Fatalf("deliver: %+v", a)
	}
	h.P.Flush(ctx)
	h.P.Tick()
	watchIDs(t, w, seen)
	for _, id := range a.ItemIDs {
		if len(seen[id]) != 1 || seen[id][0].Status != pipeline.StatusUnavailable || seen[id][0].Type != "job.assign" || seen[id][0].Reason == "" {
			t.Fatalf("%s without a leader: want one UNAVAILABLE event with a reason, have %+v", id, seen[id])
		}
	}

	h.Log.SetLeader(true)
	a = h.P.Deliver(ctx, pipeline.Entry{Type: "job.dispatch", Payload: []byte(`{"dispatch_id":"d2","scheduler":"s","items":[{"job_id":"j3","worker_id":"w3"}]}`)})
	if !a.Received || len(a.ItemIDs) != 1 {
		t.Fatalf("deliver: %+v", a)
	}
	h.P.Flush(ctx)
	if h.Log.Pending() != 1 {
		t.Fatalf("item not proposed: %d pending", h.Log.Pending())
	}
	h.Clock.Advance(6 * time.Second)
	h.P.Tick()
	watchIDs(t, w, seen)
	id := a.ItemIDs[0]
	if len(seen[id]) != 1 || seen[id][0].Status != pipeline.StatusUncertain {
		t.Fatalf("%s unconfirmed past the commit timeout: want one UNCERTAIN event, have %+v", id, seen[id])
	}
	h.Log.CommitNext()
	watchIDs(t, w, seen)
	if len(seen[id]) != 2 || seen[id][1].Status == pipeline.StatusUncertain || !after(seen[id][1], seen[id][0]) {
		t.Fatalf("%s committed late: want its recorded outcome after the UNCERTAIN event, have %+v", id, seen[id])
	}

	// Redelivered, the applied item has no new apply: its outcome still
	// reaches the watch stream, as a duplicate of the first.
	a = h.P.Deliver(ctx, pipeline.Entry{Type: "job.dispatch", Payload: []byte(`{"dispatch_id":"d2","scheduler":"s","items":[{"job_id":"j3","worker_id":"w3"}]}`)})
	if !a.Received || len(a.ItemIDs) != 1 || a.ItemIDs[0] != id {
		t.Fatalf("redeliver: %+v", a)
	}
	h.Drain()
	watchIDs(t, w, seen)
	if len(seen[id]) != 3 || !seen[id][2].Duplicate || seen[id][2].FirstIndex != seen[id][1].Index || !after(seen[id][2], seen[id][1]) ||
		seen[id][2].Status != seen[id][1].Status || seen[id][2].Reason != seen[id][1].Reason {
		t.Fatalf("%s redelivered: want a duplicate of the recorded outcome naming index %d, have %+v", id, seen[id][1].Index, seen[id])
	}
	if o, ok := h.P.OutcomeOf(strings.TrimPrefix(id, "req:")); !ok || o.Status != seen[id][1].Status {
		t.Fatalf("%s redelivered: its queryable outcome must stay %s, have %s", id, seen[id][1].Status, o)
	}
}

// after: a is later than b on the watch stream.
func after(a, b pipeline.Event) bool {
	return a.Index > b.Index || (a.Index == b.Index && a.Pos > b.Pos)
}

// TestReceiptMaxItemsEveryOutcomeOnWatch_RaftCluster is the max-size
// receipt over a real 3-node raftstore cluster (etcd raft, WAL, gRPC on
// 127.0.4.x) with a 2s commit timeout: delivered to a follower, 128 of its
// 512 items share one job and worker, so they commit one after another for
// longer than the timeout; the other 384 address a job each and go in
// batches. Every item's outcome from the log must reach the
// receiving node's watch stream; none may time out while queued
// (UNAVAILABLE).
func TestReceiptMaxItemsEveryOutcomeOnWatch_RaftCluster(t *testing.T) {
	c := startRaftCluster(t, "127.0.4.%d", nil, &rcluster{t: t, eval: pipelinetest.NewFakeEvaluator(), commitTimeout: 2 * time.Second})
	lead := c.leader(10 * time.Second)
	job := fmt.Sprintf(`{"job_id":%q,"queue":"q","priority":1,"command":"x"}`, maxID("j", 0))
	if o := submit(c.nodes[lead].p, "job.submit", "r0", job); o.Status != pipeline.StatusCommitted {
		t.Fatalf("submit: %s", o)
	}
	fol := c.nodes[(lead+1)%3]
	w := fol.p.Watch(fol.node.Status().Applied+1, pipeline.Filter{Types: []string{"job.assign"}})
	a := fol.p.Deliver(context.Background(), pipeline.Entry{Type: "job.dispatch", Payload: maxDispatch(t, maxID("d", 0), 128)})
	if !a.Received || len(a.ItemIDs) != 512 {
		t.Fatalf("deliver: received=%v items=%d %s", a.Received, len(a.ItemIDs), a.Reason)
	}
	seen := map[string][]pipeline.Event{}
	// logged: the item's outcome from the log (an UNCERTAIN event, a
	// commit slower than the timeout on a loaded machine, is followed by it)
	logged := func(id string) bool {
		for _, ev := range seen[id] {
			if ev.Status == pipeline.StatusCommitted || ev.Status == pipeline.StatusRejected {
				return true
			}
		}
		return false
	}
	start := time.Now()
	for missing, last, stall := len(a.ItemIDs), time.Now(), 20*time.Second; ; {
		watchIDs(t, w, seen)
		n := 0
		for _, id := range a.ItemIDs {
			for _, ev := range seen[id] {
				if ev.Status == pipeline.StatusUnavailable {
					t.Fatalf("%s: UNAVAILABLE (%s) on a healthy cluster: the item should have been appended", id, ev.Reason)
				}
			}
			if !logged(id) {
				n++
			}
		}
		if n == 0 {
			break
		}
		if n < missing {
			missing, last = n, time.Now()
		}
		if time.Since(last) > stall {
			t.Fatalf("%d of %d receipt items have no outcome on the watch stream, none arrived for %s", n, len(a.ItemIDs), stall)
		}
		time.Sleep(20 * time.Millisecond)
	}
	uncertain := 0
	for _, id := range a.ItemIDs {
		if seen[id][0].Status == pipeline.StatusUncertain {
			uncertain++
		}
	}
	t.Logf("512 items, every outcome from the log on watch in %s (%d first UNCERTAIN)", time.Since(start).Round(time.Millisecond), uncertain)
}
