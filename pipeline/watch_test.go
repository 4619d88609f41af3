package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/writ-dev/writ/pipeline"
	"github.com/writ-dev/writ/pipeline/pipelinetest"
)

// TestWatchResumeAndCompaction_FakeLog: the watch stream is filterable,
// resumable after the last seen event, and answers ErrCompacted for a
// position older than the bounded ring.
func TestWatchResumeAndCompaction_FakeLog(t *testing.T) {
	log := pipelinetest.NewFakeLog()
	p, err := pipeline.New(pipeline.Config{NodeID: "n1", Catalog: pipelinetest.FakeCatalog(), Log: log,
		Evaluator: pipelinetest.NewFakeEvaluator(), DataDir: t.TempDir(), Manual: true, WatchRing: 4, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	log.Checker, log.Observer = p.Checker(), p
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	ctx := context.Background()
	submit := func(i int) {
		h := p.SubmitAsync(ctx, pipeline.Entry{Type: "job.submit", ID: fmt.Sprintf("r%d", i), Payload: []byte(fmt.Sprintf(`{"job_id":"j%d","queue":"q%d"}`, i, i))})
		p.Flush(ctx)
		log.CommitNext()
		if o := h.Outcome(); o.Status != pipeline.StatusCommitted {
			t.Fatalf("submit %d: %s", i, o)
		}
	}
	for i := 1; i <= 3; i++ {
		submit(i)
	}
	w := p.Watch(1, pipeline.Filter{Key: "j2"})
	ev, ok, err := w.Poll()
	if err != nil || !ok || ev.ID != "req:r2" || ev.Index != 2 {
		t.Fatalf("filtered watch: %+v %v %v", ev, ok, err)
	}
	if _, ok, _ := w.Poll(); ok {
		t.Fatal("filter let another key through")
	}
	// resume strictly after (2, 0) with no filter
	w = p.WatchAfter(ev.Index, ev.Pos, pipeline.Filter{})
	ev, ok, err = w.Poll()
	if err != nil || !ok || ev.Index != 3 {
		t.Fatalf("resume: %+v %v %v", ev, ok, err)
	}
	// a blocked Next wakes on the next commit
	done := make(chan pipeline.Event, 1)
	go func() {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		e, err := w.Next(cctx)
		if err == nil {
			done <- e
		}
		close(done)
	}()
	time.Sleep(10 * time.Millisecond)
	submit(4)
	if e, ok := <-done; !ok || e.Index != 4 {
		t.Fatalf("Next after commit: %+v %v", e, ok)
	}
	for i := 5; i <= 9; i++ {
		submit(i)
	}
	if _, _, err := p.Watch(2, pipeline.Filter{}).Poll(); !errors.Is(err, pipeline.ErrCompacted) {
		t.Fatalf("old position: %v", err)
	}
	if ev, ok, err := p.Watch(9, pipeline.Filter{}).Poll(); err != nil || !ok || ev.Index != 9 {
		t.Fatalf("recent position: %+v %v %v", ev, ok, err)
	}
}
