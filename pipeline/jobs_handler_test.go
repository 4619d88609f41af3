package pipeline_test

import (
	"context"
	"testing"

	"github.com/writ-dev/writ/examples/jobs/handler"
	"github.com/writ-dev/writ/examples/jobs/jobsgen"
	"github.com/writ-dev/writ/kv"
	"github.com/writ-dev/writ/pipeline"
	"github.com/writ-dev/writ/pipeline/pipelinetest"
	"github.com/writ-dev/writ/plugins/sdk"
)

// sdkEvaluator runs the real jobs handler in process (the code path the
// plugin process runs for each Evaluate call), adapted to pipeline.Evaluator.
type sdkEvaluator struct{ p *sdk.Plugin }

func (s sdkEvaluator) Evaluate(ctx context.Context, items []pipeline.EvalItem) ([]pipeline.EvalResult, error) {
	in := make([]sdk.Item, len(items))
	for i, it := range items {
		in[i] = sdk.Item{Type: it.Type, ID: it.ID, Payload: it.Payload, State: it.State}
	}
	res := s.p.Evaluate(ctx, in)
	out := make([]pipeline.EvalResult, len(res))
	for i, r := range res {
		out[i] = pipeline.EvalResult{Effect: kv.Effect{Writes: r.Writes}, Result: r.Result, NeedKeys: r.NeedKeys}
		for _, t := range r.Transitions {
			out[i].Transitions = append(out[i].Transitions, pipeline.Transition{Machine: t.Machine, Key: t.Key, To: t.To})
		}
		if r.Err != nil {
			out[i].Err = &pipeline.EvalError{Kind: pipeline.EvalErrorKind(r.Err.Kind), Msg: r.Err.Msg}
		}
	}
	return out, nil
}

// TestJobsDomain_InProcessHandler_FakeLog drives the real jobs handler
// (queues, submit, workers, dispatch, reports, death) through the real
// pipeline over the fake log: domain rules REJECT with their reason, guards
// hold, a terminal regression opens a conflict case.
func TestJobsDomain_InProcessHandler_FakeLog(t *testing.T) {
	log := pipelinetest.NewFakeLog()
	p := startOnFakeLog(t, log, pipeline.Config{Catalog: jobsgen.Catalog(), Evaluator: sdkEvaluator{handler.Plugin()}, Manual: true})
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
	req := func(typ, id, payload string) pipeline.Outcome {
		t.Helper()
		h := p.SubmitAsync(ctx, pipeline.Entry{Type: typ, ID: id, Payload: []byte(payload)})
		drain()
		select {
		case <-h.Done():
		default:
			t.Fatalf("%s %s: no outcome after drain", typ, id)
		}
		return h.Outcome()
	}
	fact := func(typ, payload string) {
		t.Helper()
		if a := p.Report(ctx, pipeline.Entry{Type: typ, Payload: []byte(payload)}); !a.Received {
			t.Fatalf("%s: %+v", typ, a)
		}
		drain()
	}
	machine := func(key string) string {
		rec, _, _ := log.Get(ctx, key, false)
		return string(rec.Value)
	}

	if o := req("job.submit", "s0", `{"job_id":"j0","queue":"nope","priority":1,"command":"x"}`); o.Status != pipeline.StatusRejected || o.Reason == "" {
		t.Fatalf("submit to a missing queue: %s", o)
	}
	if o := req("queue.control", "q1", `{"queue":"q1","action":"create"}`); o.Status != pipeline.StatusCommitted {
		t.Fatalf("queue create: %s", o)
	}
	if o := req("job.submit", "s1", `{"job_id":"j1","queue":"q1","priority":1,"command":"x"}`); o.Status != pipeline.StatusCommitted {
		t.Fatalf("submit: %s", o)
	}
	if o := req("worker.join", "w1", `{"worker_id":"w1","capacity":1}`); o.Status != pipeline.StatusCommitted {
		t.Fatalf("join: %s", o)
	}
	if a := p.Deliver(ctx, pipeline.Entry{Type: "job.dispatch", Payload: []byte(`{"dispatch_id":"d1","scheduler":"s","items":[{"job_id":"j1","worker_id":"w1"}]}`)}); !a.Received {
		t.Fatalf("dispatch: %+v", a)
	}
	drain()
	if got := machine("_m/job/j1"); got != `{"state":"DISPATCHED","scope":"w1"}` {
		t.Fatalf("after dispatch: %s", got)
	}
	fact("job.state_report", `{"report_id":"r1","job_id":"j1","state":"RUNNING","seq":1,"worker_id":"w1"}`)
	if got := machine("_m/job/j1"); got != `{"state":"RUNNING","scope":"w1","order":1}` {
		t.Fatalf("after RUNNING: %s", got)
	}
	// the worker dies: the handler requests transitions for its running
	// jobs; the pipeline guards and applies them with the death itself
	fact("worker.death", `{"report_id":"dead1","worker_id":"w1","detected_by":"ctl"}`)
	if got := machine("_m/worker/w1"); got != `{"state":"DEAD"}` {
		t.Fatalf("worker after death: %s", got)
	}
	jobAfterDeath := machine("_m/job/j1")
	if jobAfterDeath == `{"state":"RUNNING","scope":"w1","order":1}` {
		t.Fatalf("death left the running job untouched: %s", jobAfterDeath)
	}
	t.Logf("job after worker death: %s", jobAfterDeath)
	if o := req("job.control", "c1", `{"job_id":"j1","action":"cancel"}`); o.Status != pipeline.StatusCommitted {
		t.Fatalf("cancel: %s", o)
	}
	fact("job.state_report", `{"report_id":"r9","job_id":"j1","state":"RUNNING","seq":9,"worker_id":"w1"}`)
	if got := machine("_m/job/j1"); got == `{"state":"RUNNING","scope":"w1","order":9}` {
		t.Fatalf("terminal state left: %s", got)
	}
	if h, open, _ := p.Health(ctx); h != pipeline.HealthDegraded || open != 1 {
		t.Fatalf("health %s open=%d", h, open)
	}
	if p.Outbox().Depth != 0 {
		t.Fatalf("outbox not drained: %+v", p.Outbox())
	}
}
