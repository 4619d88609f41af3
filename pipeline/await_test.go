package pipeline_test

import (
	"context"
	"testing"
	"time"

	"github.com/writ-dev/writ/examples/jobs/jobsgen"
	"github.com/writ-dev/writ/kv"
	"github.com/writ-dev/writ/pipeline"
	"github.com/writ-dev/writ/pipeline/pipelinetest"
)

// thenObserver calls then after the pipeline observed a batch, before the
// log wakes the batch's own waiter (the order raftstore and FakeLog keep).
type thenObserver struct {
	kv.ApplyObserver
	then func()
}

func (o *thenObserver) Applied(index uint64, batch []kv.Command, results []kv.Result) {
	o.ApplyObserver.Applied(index, batch, results)
	if f := o.then; f != nil {
		o.then = nil
		f()
	}
}

// TestRetryBetweenObserverAndWaiterIsADuplicate_FakeLog: a request is
// answered when the observer hears its batch applied; a retry with the same
// ID that arrives before the proposal's own waiter wakes holds the ID's
// live slot. The waiter must not answer that retry with the first
// submission's command (COMMITTED, not a duplicate, without its result):
// the retry is answered as a duplicate of the first application. make test
// under load failed TestMetrics_OutcomesAndStages_FakeLog this way
// ("repeated r0: COMMITTED index=9 verdict=apply"). The window is a
// goroutine hand-off, so the test tries it many times.
func TestRetryBetweenObserverAndWaiterIsADuplicate_FakeLog(t *testing.T) {
	for round := range 40 {
		log := pipelinetest.NewFakeLog()
		p := startOnFakeLog(t, log, pipeline.Config{Catalog: jobsgen.Catalog(), Evaluator: pipelinetest.NewFakeEvaluator(),
			CommitTimeout: 5 * time.Second, RetryMin: time.Millisecond, RetryMax: 20 * time.Millisecond, TickInterval: time.Millisecond})
		obs := &thenObserver{ApplyObserver: p}
		log.Observer = obs
		en := pipeline.Entry{Type: "job.submit", ID: "r0", Payload: []byte(`{"job_id":"j0","queue":"q0","priority":1,"command":"run"}`)}
		ctx := context.Background()
		first := p.SubmitAsync(ctx, en)
		for log.Pending() == 0 {
			time.Sleep(100 * time.Microsecond)
		}
		var retry *pipeline.Handle
		obs.then = func() { retry = p.SubmitAsync(ctx, en) }
		for !log.CommitNext() {
		}
		<-first.Done()
		if o := first.Outcome(); o.Status != pipeline.StatusCommitted || o.Duplicate {
			t.Fatalf("round %d: first submission: %s", round, o)
		}
		done := retry.Done()
		for waited := 0; ; waited++ {
			select {
			case <-done:
			case <-time.After(time.Millisecond):
				log.CommitNext() // a retry that proposes again (it should not)
				if waited < 5000 {
					continue
				}
				t.Fatalf("round %d: the retry got no answer", round)
			}
			break
		}
		o := retry.Outcome()
		if o.Status != pipeline.StatusCommitted || !o.Duplicate || o.Index != first.Outcome().Index {
			t.Fatalf("round %d: retry answered %s (duplicate=%v), want COMMITTED at index %d as a duplicate", round, o, o.Duplicate, first.Outcome().Index)
		}
		p.Stop()
	}
}
