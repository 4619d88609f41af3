package pipeline_test

import (
	"context"
	"testing"
	"time"

	"github.com/writ-dev/writ/pipeline"
	"github.com/writ-dev/writ/pipeline/pipelinetest"
)

// Done is made on first use: asked before the reply it closes at the
// reply, asked after it is already closed, and every handle of the same
// request sees the same outcome.
func TestHandleDoneBeforeAndAfterReply_FakeLog(t *testing.T) {
	log := pipelinetest.NewFakeLog()
	p := startOnFakeLog(t, log, pipeline.Config{Catalog: pipelinetest.FakeCatalog(), Evaluator: pipelinetest.NewFakeEvaluator(), Manual: true})
	ctx := context.Background()
	en := pipeline.Entry{Type: "job.submit", ID: "r1", Payload: []byte(`{"job_id":"j1","queue":"q1"}`)}
	early := p.SubmitAsync(ctx, en)
	shared := p.SubmitAsync(ctx, en) // same ID in flight: same outcome
	done := early.Done()
	select {
	case <-done:
		t.Fatal("done before commit")
	default:
	}
	p.Flush(ctx)
	select {
	case <-done:
		t.Fatal("done before commit")
	default:
	}
	log.CommitNext()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("not done after commit")
	}
	select {
	case <-shared.Done():
	default:
		t.Fatal("shared handle not done")
	}
	if o := shared.Outcome(); o.Status != pipeline.StatusCommitted || o.Index != 1 {
		t.Fatalf("shared outcome %s", o)
	}
	late := p.SubmitAsync(ctx, pipeline.Entry{Type: "job.submit", ID: "r2", Payload: []byte(`{"job_id":"j2","queue":"q2"}`)})
	p.Flush(ctx)
	log.CommitNext()
	select {
	case <-late.Done():
	default:
		t.Fatal("handle answered before Done was asked is not done")
	}
	if o := late.Outcome(); o.Status != pipeline.StatusCommitted || o.Index != 2 {
		t.Fatalf("late outcome %s", o)
	}
	bad := p.SubmitAsync(ctx, pipeline.Entry{Type: "job.nope", ID: "r3", Payload: []byte(`{}`)})
	select {
	case <-bad.Done():
	default:
		t.Fatal("rejected handle not done")
	}
	if o := bad.Outcome(); o.Status != pipeline.StatusRejected {
		t.Fatalf("bad outcome %s", o)
	}
}
