package metrics

import (
	"testing"
	"time"
)

// BenchmarkHooksPerRequest is what one committed request costs the
// metrics on the node that received it: validate, its share of the batch
// stages (one each; batches amortise them further), its outcome count and
// the reply observation, with the clock reads around them.
func BenchmarkHooksPerRequest(b *testing.B) {
	m := New()
	m.DeclareTypes(map[string]string{"job.submit": "request"})
	b.ReportAllocs()
	for b.Loop() {
		t0 := time.Now()
		m.ObserveStage(StageValidate, time.Since(t0))
		m.ObserveStage(StageEvaluate, time.Since(t0))
		m.ObserveStage(StageAppend, time.Since(t0))
		m.ObserveStage(StageCommitWait, time.Since(t0))
		m.ObserveStage(StageApply, time.Since(t0))
		m.StateCommitted(time.Since(t0))
		m.PeerSent("8a98d07b5509ed1", 1, 300)
		m.PeerSent("8a98c07b5509d1e", 1, 300)
		m.CountOutcome("job.submit", "request", "COMMITTED")
		m.ObserveStage(StageReply, time.Since(t0))
	}
}
