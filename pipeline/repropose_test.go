package pipeline_test

import (
	"context"
	"testing"
	"time"

	"github.com/writ-dev/writ/pipeline"
)

// TestRequeuedRequestNeverAnsweredUnavailable_FakeLog: a request proposed
// under one leader and requeued at a leader change (to be proposed again)
// still has its first proposal in the log, which may commit. Its answer
// may then never be UNAVAILABLE ("not appended", W2): not when the
// re-proposal fails for want of a leader, not when its deadline passes
// before it is proposed again, not when the node stops. Each case then
// commits the first proposal, as a new leader may. Before the fix each
// answered UNAVAILABLE (a robustness run, seed 3029, saw a receipt item
// watched "unavailable" at 192 and applied at 240).
func TestRequeuedRequestNeverAnsweredUnavailable_FakeLog(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name string
		end  func(r *drainRig)
	}{
		{"the re-proposal finds no leader", func(r *drainRig) {
			r.log.SetLeader(false)
			r.p.Flush(ctx)
		}},
		{"the deadline passes while requeued", func(r *drainRig) {
			r.clock.Advance(2 * time.Second)
			r.p.Tick()
		}},
		{"the node stops while requeued", func(r *drainRig) {
			if err := r.p.Stop(); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newDrainRig(t, pipeline.Config{CommitTimeout: time.Second, LeaderSettle: 50 * time.Millisecond, RetryMin: 10 * time.Millisecond})
			h := r.p.SubmitAsync(ctx, pipeline.Entry{Type: "job.submit", ID: "r1", Payload: []byte(`{"job_id":"j1","queue":"q","priority":1,"command":"x"}`)})
			for i := 0; i < 100 && r.log.Pending() == 0; i++ {
				r.p.Flush(ctx)
				time.Sleep(time.Millisecond)
			}
			if r.log.Pending() != 1 {
				select {
				case <-h.Done():
					t.Fatalf("answered before any leader change: %+v", h.Outcome())
				default:
				}
				t.Fatalf("%d batches pending, want the request's proposal", r.log.Pending())
			}
			r.log.NewTerm() // a leader change; the proposal is still in the log
			r.p.Tick()
			r.clock.Advance(100 * time.Millisecond) // past LeaderSettle
			r.p.Tick()                              // requeued, not yet proposed again
			c.end(r)
			select {
			case <-h.Done():
			case <-time.After(5 * time.Second):
				t.Fatal("no answer")
			}
			o := h.Outcome()
			if o.Status == pipeline.StatusUnavailable {
				t.Fatalf("answered UNAVAILABLE (%s) while its first proposal may commit", o.Reason)
			}
			if o.Status != pipeline.StatusUncertain {
				t.Fatalf("answered %s (%s), want UNCERTAIN", o.Status, o.Reason)
			}
			if !r.log.CommitNext() {
				t.Fatal("the first proposal is gone from the log")
			}
			if res, ok := r.log.Outcome("req:r1"); !ok || res.Index == 0 {
				t.Fatalf("the first proposal did not apply: %+v %v", res, ok)
			}
			_ = r.p.Stop()
		})
	}
}
