package pipeline_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/writ-dev/writ/kv"
	"github.com/writ-dev/writ/pipeline"
)

// fenceRecorder passes applied batches on to the pipeline and records the
// IDs of the fences in them, in log order.
type fenceRecorder struct {
	next   kv.ApplyObserver
	fences []string
}

func (r *fenceRecorder) Applied(index uint64, batch []kv.Command, results []kv.Result) {
	for _, c := range batch {
		if c.Type == kv.TypeFence {
			r.fences = append(r.fences, c.ID)
		}
	}
	r.next.Applied(index, batch, results)
}

// TestTimedOutRequestsFencedInIDOrder_FakeLog: requests that time out in
// one tick are fenced in ID order, whatever the order of the pipeline's
// maps, so a deterministic driver (robustness/sim) sees the same proposals
// on every run.
func TestTimedOutRequestsFencedInIDOrder_FakeLog(t *testing.T) {
	h := newFenceHarness(t)
	rec := &fenceRecorder{next: h.P}
	h.Log.Observer = rec
	ctx := context.Background()
	ids := []string{"r5", "r1", "r7", "r4", "r0", "r2", "r6", "r3", "r9", "r8"}
	for _, id := range ids {
		// each on its own queue, so that no key latch holds one back
		h.P.SubmitAsync(ctx, pipeline.Entry{Type: "job.submit", ID: id, Payload: []byte(`{"job_id":"j` + id + `","queue":"q` + id + `","priority":1,"command":"x"}`)})
	}
	h.P.Flush(ctx)
	if h.Log.Pending() == 0 {
		t.Fatal("the requests were not proposed")
	}
	h.Log.Lose() // the requests' proposals are lost: each must be fenced
	h.Clock.Advance(6 * time.Second)
	h.P.Tick()
	for h.Log.CommitNext() {
	}
	var want []string
	for _, id := range ids {
		want = append(want, "req:"+id)
	}
	slices.Sort(want)
	if !slices.Equal(rec.fences, want) {
		t.Fatalf("fences committed in the order %q, want ID order %q", rec.fences, want)
	}
}

// TestUnconfirmedFactsReproposedInIDOrder_FakeLog: facts whose proposals
// are not confirmed within the commit timeout are proposed again in ID
// order, whatever the order of the pipeline's maps.
func TestUnconfirmedFactsReproposedInIDOrder_FakeLog(t *testing.T) {
	h := newFenceHarness(t)
	var order []string
	h.Log.Observer = observerFunc(func(index uint64, batch []kv.Command, results []kv.Result) {
		for _, c := range batch {
			order = append(order, c.ID)
		}
		h.P.Applied(index, batch, results)
	})
	ctx := context.Background()
	var want []string
	for _, i := range []int{5, 1, 7, 4, 0, 2, 6, 3, 9, 8} {
		a := h.P.Report(ctx, pipeline.Entry{Type: "worker.usage",
			Payload: []byte(fmt.Sprintf(`{"report_id":"u%d","worker_id":"w%d","seq":1,"cpu_millis":1,"mem_bytes":2}`, i, i))})
		if !a.Received {
			t.Fatalf("report u%d not received: %+v", i, a)
		}
		want = append(want, fmt.Sprintf("fact:worker.usage:u%d", i))
	}
	slices.Sort(want)
	h.P.Flush(ctx)
	if h.Log.Pending() == 0 {
		t.Fatal("the facts were not proposed")
	}
	h.Log.Lose()                     // never appended: each must be proposed again
	h.Clock.Advance(6 * time.Second) // the commit timeout: queued again
	h.P.Tick()
	h.Clock.Advance(5 * time.Second) // past their retry delay
	h.P.Flush(ctx)
	for h.Log.CommitNext() {
	}
	if !slices.Equal(order, want) {
		t.Fatalf("facts proposed again in the order %q, want ID order %q", order, want)
	}
}

type observerFunc func(index uint64, batch []kv.Command, results []kv.Result)

func (f observerFunc) Applied(index uint64, batch []kv.Command, results []kv.Result) {
	f(index, batch, results)
}
