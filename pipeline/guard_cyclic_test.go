package pipeline_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/writ-dev/writ/internal/cyclic/cyclicgen"
	"github.com/writ-dev/writ/internal/cyclic/handler"
	"github.com/writ-dev/writ/pipeline"
	"github.com/writ-dev/writ/pipeline/pipelinetest"
)

// TestCyclicLateOlderReportIsStale_FakeLog is issue 13 defect 2 through the
// real pipeline (outbox, guard, the cyclic domain's real handler in process,
// apply-time Checker) over the fake log: on a machine that goes back and
// forth, UNHEALTHY@3, UNHEALTHY@11, then a late HEALTHY@6 ends UNHEALTHY
// with order 11. Then a second prober's watch opens a new epoch: its probes
// from seq 1 apply, and a late probe of the first prober is quarantined.
func TestCyclicLateOlderReportIsStale_FakeLog(t *testing.T) {
	log := pipelinetest.NewFakeLog()
	p := startOnFakeLog(t, log, pipeline.Config{Catalog: cyclicgen.Catalog(), Evaluator: sdkEvaluator{handler.Plugin()}, Manual: true})
	ctx := context.Background()
	drain := func() {
		for i := 0; i < 50; i++ {
			p.Flush(ctx)
			if !log.CommitNext() && log.Pending() == 0 {
				p.Tick()
				p.Flush(ctx)
				if pipelinetest.Idle(p, log) {
					return
				}
			}
		}
	}
	watch := func(prober string) {
		t.Helper()
		h := p.SubmitAsync(ctx, pipeline.Entry{Type: "target.watch", ID: "w-" + prober, Payload: []byte(`{"target":"t1","prober":"` + prober + `"}`)})
		drain()
		if o := h.Outcome(); o.Status != pipeline.StatusCommitted {
			t.Fatalf("watch by %s: %s", prober, o)
		}
	}
	probe := func(prober, result string, seq int) {
		t.Helper()
		a := p.Report(ctx, pipeline.Entry{Type: "target.probe", Payload: []byte(fmt.Sprintf(
			`{"report_id":"%s-%d","target":"t1","prober":"%s","result":"%s","seq":%d}`, prober, seq, prober, result, seq))})
		if !a.Received {
			t.Fatalf("probe: %+v", a)
		}
		drain()
	}
	record := func(state string, order uint64) {
		t.Helper()
		rec, ok, _ := log.Get(ctx, "_m/target/t1", false)
		mr, err := pipeline.ParseMachineRecord(rec.Value)
		if !ok || err != nil || mr.State != state || mr.Order != order {
			t.Fatalf("_m/target/t1 = %s, want %s with order %d", rec.Value, state, order)
		}
	}
	watch("p1")
	probe("p1", "down", 3)
	record("UNHEALTHY", 3)
	probe("p1", "down", 11)
	record("UNHEALTHY", 11)
	probe("p1", "up", 6)
	record("UNHEALTHY", 11)
	if cs, _ := p.Conflicts(ctx); len(cs) != 0 {
		t.Fatalf("a stale report opened a conflict case: %+v", cs)
	}
	watch("p2")
	record("UNKNOWN", 0)
	probe("p2", "up", 1)
	record("HEALTHY", 1)
	probe("p1", "down", 12)
	record("HEALTHY", 1)
	if cs, _ := p.Conflicts(ctx); len(cs) != 1 || !cs[0].Open {
		t.Fatalf("late probe of the previous epoch: conflict cases %+v, want one open", cs)
	}
	probe("p2", "down", 2)
	record("UNHEALTHY", 2)
}
