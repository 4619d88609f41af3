package pipeline_test

import (
	"context"
	"strings"
	"testing"

	"github.com/writ-dev/writ/examples/jobs/jobsgen"
	"github.com/writ-dev/writ/pipeline"
	"github.com/writ-dev/writ/pipeline/pipelinetest"
)

// decliningEval answers like pipelinetest.FakeEvaluator, except that it
// ignores (answers nothing at all) or refuses the types it is told to.
type decliningEval struct {
	*pipelinetest.FakeEvaluator
	ignore map[string]bool
	refuse map[string]string
}

func (d decliningEval) Evaluate(ctx context.Context, items []pipeline.EvalItem) ([]pipeline.EvalResult, error) {
	out, err := d.FakeEvaluator.Evaluate(ctx, items)
	if err != nil {
		return nil, err
	}
	for i, it := range items {
		switch {
		case d.ignore[it.Type]:
			out[i] = pipeline.EvalResult{}
		case d.refuse[it.Type] != "":
			out[i] = pipeline.EvalResult{Err: &pipeline.EvalError{Kind: pipeline.EvalRule, Msg: d.refuse[it.Type]}}
		}
	}
	return out, nil
}

// TestDeclinedEntryMovesNoMachine_FakeLog: the handler's answer and the
// guard make one decision. When the handler ignores or refuses an entry
// whose own transition the guard allows, the machine stays where it is: a
// request is REJECTED with the reason, a fact is quarantined (conflict case
// open, fact retained and retired from the outbox), never silently dropped.
func TestDeclinedEntryMovesNoMachine_FakeLog(t *testing.T) {
	for _, mode := range []string{"ignore", "refuse"} {
		t.Run(mode, func(t *testing.T) {
			ev := decliningEval{FakeEvaluator: pipelinetest.NewFakeEvaluator(), ignore: map[string]bool{}, refuse: map[string]string{}}
			log := pipelinetest.NewFakeLog()
			p := startOnFakeLog(t, log, pipeline.Config{Catalog: jobsgen.Catalog(), Evaluator: ev, Manual: true})
			ctx := context.Background()
			drain := func() {
				for i := 0; i < 50; i++ {
					p.Flush(ctx)
					if !log.CommitNext() && pipelinetest.Idle(p, log) {
						return
					}
				}
			}
			machine := func(key string) string { rec, _, _ := log.Get(ctx, key, false); return string(rec.Value) }
			req := func(typ, id, payload string) pipeline.Outcome {
				h := p.SubmitAsync(ctx, pipeline.Entry{Type: typ, ID: id, Payload: []byte(payload)})
				drain()
				<-h.Done()
				return h.Outcome()
			}
			if o := req("job.submit", "s1", `{"job_id":"j1","queue":"q","priority":1,"command":"x"}`); o.Status != pipeline.StatusCommitted {
				t.Fatalf("submit: %s", o)
			}
			if o := req("job.assign", "a1", `{"job_id":"j1","worker_id":"w2"}`); o.Status != pipeline.StatusCommitted {
				t.Fatalf("assign: %s", o)
			}
			decline := func(typ string) {
				if mode == "ignore" {
					ev.ignore[typ] = true
				} else {
					ev.refuse[typ] = "worker w1 does not hold job j1"
				}
			}
			decline("job.control")
			decline("job.state_report")

			o := req("job.control", "c1", `{"job_id":"j1","action":"cancel"}`)
			if o.Status != pipeline.StatusRejected || o.Reason == "" {
				t.Fatalf("declined request: %s, want REJECTED with a reason", o)
			}
			if got := machine("_m/job/j1"); got != `{"state":"DISPATCHED","scope":"w2"}` {
				t.Fatalf("declined request moved the machine: %s", got)
			}

			if a := p.Report(ctx, pipeline.Entry{Type: "job.state_report", Payload: []byte(`{"report_id":"r1","job_id":"j1","state":"COMPLETED","seq":1,"worker_id":"w2"}`)}); !a.Received {
				t.Fatalf("report: %+v", a)
			}
			drain()
			if got := machine("_m/job/j1"); got != `{"state":"DISPATCHED","scope":"w2"}` {
				t.Fatalf("declined fact moved the machine: %s", got)
			}
			cs, err := p.Conflicts(ctx)
			if err != nil || len(cs) != 1 || cs[0].Instance != "j1" || cs[0].Current != "DISPATCHED" || cs[0].Incoming != "COMPLETED" || !cs[0].Open {
				t.Fatalf("declined fact not quarantined: %+v %v", cs, err)
			}
			if mode == "refuse" && !strings.Contains(cs[0].Reason, "does not hold") {
				t.Fatalf("case reason %q does not carry the handler's", cs[0].Reason)
			}
			if h, open, _ := p.Health(ctx); h != pipeline.HealthDegraded || open != 1 {
				t.Fatalf("health %s open=%d", h, open)
			}
			if d := p.Outbox().Depth; d != 0 {
				t.Fatalf("declined fact still in the outbox (%d): it must be retained in the log and retired", d)
			}
		})
	}
}
