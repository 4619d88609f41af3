package pipeline_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/writ-dev/writ/examples/jobs/jobsgen"
	"github.com/writ-dev/writ/pipeline"
	"github.com/writ-dev/writ/pipeline/pipelinetest"
)

// TestReceiptItemsAlwaysOnWatchProperty_FakeLog: receipts of 1–512 items on
// a few shared jobs and workers (so items queue behind each other),
// delivered and redelivered between leader losses, lost proposals, commits
// and clock jumps past the commit timeout. Once the log is healthy again
// every item any acknowledgement named has an outcome on the watch stream,
// and the stream stays strictly ordered by (Index, Pos), events the log
// carries and events put on the ring alike.
func TestReceiptItemsAlwaysOnWatchProperty_FakeLog(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		h, err := pipelinetest.NewHarness(t.TempDir(), jobsgen.Catalog())
		if err != nil {
			rt.Fatal(err)
		}
		defer h.P.Stop()
		ctx := context.Background()
		h.P.SubmitAsync(ctx, pipeline.Entry{Type: "job.submit", ID: "r0", Payload: []byte(`{"job_id":"j0","queue":"q","priority":1,"command":"x"}`)})
		h.Drain()
		w := h.P.Watch(0, pipeline.Filter{})
		acked := map[string]bool{}
		var evs []pipeline.Event
		poll := func() {
			for {
				ev, ok, err := w.Poll()
				if err != nil {
					rt.Fatal(err)
				}
				if !ok {
					return
				}
				evs = append(evs, ev)
			}
		}
		steps := rapid.IntRange(1, 12).Draw(rt, "steps")
		for s := 0; s < steps; s++ {
			switch rapid.IntRange(0, 6).Draw(rt, "op") {
			case 0, 1:
				n := rapid.SampledFrom([]int{1, 2, 5, 40, 512}).Draw(rt, "items")
				items := make([]map[string]string, n)
				for i := range items {
					items[i] = map[string]string{
						"job_id":    fmt.Sprintf("j%d", rapid.IntRange(0, 3).Draw(rt, "job")),
						"worker_id": fmt.Sprintf("w%d", rapid.IntRange(0, 3).Draw(rt, "worker"))}
				}
				id := fmt.Sprintf("d%d", rapid.IntRange(0, 3).Draw(rt, "dispatch")) // redelivery too
				b, _ := json.Marshal(map[string]any{"dispatch_id": id, "scheduler": "s", "items": items})
				a := h.P.Deliver(ctx, pipeline.Entry{Type: "job.dispatch", Payload: b})
				if !a.Received || len(a.ItemIDs) != n {
					rt.Fatalf("deliver %s: received=%v items=%d %s", id, a.Received, len(a.ItemIDs), a.Reason)
				}
				for _, it := range a.ItemIDs {
					acked[it] = true
				}
			case 2:
				h.Log.SetLeader(rapid.Bool().Draw(rt, "leader"))
			case 3:
				for i := rapid.IntRange(1, 50).Draw(rt, "commits"); i > 0; i-- {
					h.P.Flush(ctx)
					h.Log.CommitNext()
				}
			case 4:
				h.Log.Lose()
			case 5:
				h.Clock.Advance(time.Duration(rapid.IntRange(1, 7000).Draw(rt, "ms")) * time.Millisecond)
				h.P.Tick()
			case 6:
				h.P.Flush(ctx)
			}
			poll()
		}
		h.Log.SetLeader(true)
		for round := 0; round < 5000; round++ {
			h.P.Flush(ctx)
			if !h.Log.CommitNext() {
				h.Clock.Advance(100 * time.Millisecond)
				h.P.Tick()
			}
			if round > 100 && pipelinetest.Idle(h.P, h.Log) {
				h.P.Flush(ctx)
				if pipelinetest.Idle(h.P, h.Log) {
					break
				}
			}
		}
		h.Clock.Advance(10 * time.Second)
		h.P.Tick()
		poll()
		seen := map[string]bool{}
		for i, ev := range evs {
			seen[ev.ID] = true
			if i > 0 && !after(ev, evs[i-1]) {
				rt.Fatalf("watch stream out of order: %+v after %+v", ev, evs[i-1])
			}
		}
		for id := range acked {
			if !seen[id] {
				rt.Fatalf("%s was acknowledged in a receipt and has no outcome on the watch stream", id)
			}
		}
	})
}
