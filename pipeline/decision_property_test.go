package pipeline_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"

	"pgregory.net/rapid"

	"github.com/writ-dev/writ/examples/jobs/jobsgen"
	"github.com/writ-dev/writ/pipeline"
	"github.com/writ-dev/writ/pipeline/pipelinetest"
)

// decidingEval accepts, ignores or refuses each item as next says.
type decidingEval struct {
	*pipelinetest.FakeEvaluator
	next func(typ string) string // "accept", "ignore" or "refuse"
}

func (d decidingEval) Evaluate(ctx context.Context, items []pipeline.EvalItem) ([]pipeline.EvalResult, error) {
	out, err := d.FakeEvaluator.Evaluate(ctx, items)
	if err != nil {
		return nil, err
	}
	for i, it := range items {
		switch d.next(it.Type) {
		case "ignore":
			out[i] = pipeline.EvalResult{}
		case "refuse":
			out[i] = pipeline.EvalResult{Err: &pipeline.EvalError{Kind: pipeline.EvalRule, Msg: "refused by the test"}}
		}
	}
	return out, nil
}

// TestOneDecisionProperty_FakeLog: over random sequences of state reports
// (any state, any sequence number, reordered, repeated) and random handler
// answers, a job's machine record moves exactly when the guard allows the
// transition AND the handler accepted the entry; a report the handler
// declined while the guard allowed it always opens a conflict case; no
// report stays in the outbox.
func TestOneDecisionProperty_FakeLog(t *testing.T) {
	job := jobsgen.Catalog()
	m, _ := job.Machine("job")
	var applied, declined int
	defer func() { t.Logf("%d reports applied, %d declined while the guard allowed them", applied, declined) }()
	rapid.Check(t, func(rt *rapid.T) {
		dir, err := os.MkdirTemp("", "writ-decision-")
		if err != nil {
			rt.Fatal(err)
		}
		defer os.RemoveAll(dir)
		var answer string
		ev := decidingEval{FakeEvaluator: pipelinetest.NewFakeEvaluator(), next: func(typ string) string {
			if typ != "job.state_report" {
				return "accept"
			}
			return answer
		}}
		log := pipelinetest.NewFakeLog()
		p, err := pipeline.New(pipeline.Config{NodeID: "n1", Catalog: job, Evaluator: ev, Log: log, DataDir: dir, Manual: true, Logger: quiet()})
		if err != nil {
			rt.Fatal(err)
		}
		log.Checker, log.Observer = p.Checker(), p
		if err := p.Start(context.Background()); err != nil {
			rt.Fatal(err)
		}
		defer p.Stop()
		ctx := context.Background()
		drain := func() {
			for i := 0; i < 50; i++ {
				p.Flush(ctx)
				if !log.CommitNext() && pipelinetest.Idle(p, log) {
					return
				}
			}
		}
		for _, en := range []pipeline.Entry{
			{Type: "job.submit", ID: "s1", Payload: []byte(`{"job_id":"j1","queue":"q","priority":1,"command":"x"}`)},
			{Type: "job.assign", ID: "a1", Payload: []byte(`{"job_id":"j1","worker_id":"w1"}`)},
		} {
			h := p.SubmitAsync(ctx, en)
			drain()
			if o := h.Outcome(); o.Status != pipeline.StatusCommitted {
				rt.Fatalf("%s: %s", en.Type, o)
			}
		}
		read := func() (pipeline.MachineRecord, bool) {
			rec, ok, _ := log.Get(ctx, "_m/job/j1", false)
			if !ok {
				return pipeline.MachineRecord{}, false
			}
			mr, err := pipeline.ParseMachineRecord(rec.Value)
			if err != nil {
				rt.Fatalf("machine record %s: %v", rec.Value, err)
			}
			return mr, true
		}
		steps := rapid.IntRange(1, 12).Draw(rt, "steps")
		for i := 0; i < steps; i++ {
			state := rapid.SampledFrom([]string{"RUNNING", "COMPLETED", "FAILED"}).Draw(rt, "state")
			seq := rapid.Uint64Range(1, 6).Draw(rt, "seq")
			answer = rapid.SampledFrom([]string{"accept", "ignore", "refuse"}).Draw(rt, "answer")
			before, _ := read()
			cases, _ := p.Conflicts(ctx)
			v, _ := pipeline.Decide(m, before, true, state, seq, true, pipeline.VerdictQuarantine)
			payload, _ := json.Marshal(map[string]any{"report_id": fmt.Sprintf("r%d", i), "job_id": "j1", "state": state, "seq": seq, "worker_id": "w1"})
			if a := p.Report(ctx, pipeline.Entry{Type: "job.state_report", Payload: payload}); !a.Received {
				rt.Fatalf("report: %+v", a)
			}
			drain()
			after, _ := read()
			moved := after != before
			want := v == pipeline.VerdictApply && answer == "accept"
			if v == pipeline.VerdictDuplicate && before.HasOrder && seq > before.Order {
				// A newer report of the current state is a duplicate that
				// advances the recorded order (state unchanged).
				want = true
				if after.State != before.State || after.Order != seq {
					rt.Fatalf("newer duplicate %s@%d from %+v: now %+v, want the same state at order %d", state, seq, before, after, seq)
				}
			}
			if moved != want {
				rt.Fatalf("report %s@%d from %+v, guard %s, handler %s: machine moved=%v (now %+v), want moved=%v",
					state, seq, before, v, answer, moved, after, want)
			}
			if want {
				applied++
			}
			if v == pipeline.VerdictApply && answer != "accept" {
				declined++
				now, _ := p.Conflicts(ctx)
				if len(now) != 1 || !now[0].Open || now[0].Incoming != state || (len(cases) == 1 && now[0].Revision < cases[0].Revision) {
					rt.Fatalf("declined report %s@%d not quarantined: cases %+v (before %+v)", state, seq, now, cases)
				}
			}
			if d := p.Outbox().Depth; d != 0 {
				rt.Fatalf("outbox depth %d after report %d", d, i)
			}
		}
	})
}
