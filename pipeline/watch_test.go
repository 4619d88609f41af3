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
	p, _, submit := newWatchPipeline(t, 4)
	ctx := context.Background()
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

// TestWatchGapAfterSnapshotRestore_FakeLog: when the log reports that state
// jumped by a snapshot (kv.RestoreObserver), a watcher positioned before the
// restored index gets ErrCompacted instead of silently skipping the entries
// the snapshot covered, a fresh watcher does not see the events from before
// the gap, and events after the gap flow as usual.
func TestWatchGapAfterSnapshotRestore_FakeLog(t *testing.T) {
	p, log, submit := newWatchPipeline(t, 64)
	ctx := context.Background()
	submit(1)
	submit(2)
	behind := p.Watch(1, pipeline.Filter{})
	if ev, ok, err := behind.Poll(); err != nil || !ok || ev.Index != 1 {
		t.Fatalf("before the gap: %+v %v %v", ev, ok, err)
	}
	// A blocked watcher is woken by the restore and told of the gap.
	blocked := p.Watch(3, pipeline.Filter{})
	woke := make(chan error, 1)
	go func() {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_, err := blocked.Next(cctx)
		woke <- err
	}()
	time.Sleep(10 * time.Millisecond)
	// r3 commits on this node only inside a snapshot: applied, never observed.
	p.SubmitAsync(ctx, pipeline.Entry{Type: "job.submit", ID: "r3", Payload: []byte(`{"job_id":"j3","queue":"q3"}`)})
	p.Flush(ctx)
	if !log.CommitSilently() {
		t.Fatal("nothing pending for the snapshot to cover")
	}
	snap := log.Index()
	p.Restored(snap)
	if err := <-woke; !errors.Is(err, pipeline.ErrCompacted) {
		t.Fatalf("blocked watcher across the gap: %v, want ErrCompacted", err)
	}
	if _, _, err := behind.Poll(); !errors.Is(err, pipeline.ErrCompacted) {
		t.Fatalf("watcher before the gap: %v, want ErrCompacted", err)
	}
	fresh := p.Watch(0, pipeline.Filter{})
	if ev, ok, err := fresh.Poll(); err != nil || ok {
		t.Fatalf("fresh watcher saw an event from before the gap: %+v %v %v", ev, ok, err)
	}
	submit(4)
	ev, ok, err := fresh.Poll()
	if err != nil || !ok || ev.Index <= snap || ev.ID != "req:r4" {
		t.Fatalf("after the gap: %+v %v %v", ev, ok, err)
	}
	if ev2, ok, err := p.Watch(snap+1, pipeline.Filter{}).Poll(); err != nil || !ok || ev2.Index != ev.Index {
		t.Fatalf("watch from the restored index: %+v %v %v", ev2, ok, err)
	}
}

// newWatchPipeline is a manual pipeline over the fake log with a watch ring
// of the given size, and a submit that commits job j<i> on queue q<i>.
func newWatchPipeline(t *testing.T, ring int) (*pipeline.Pipeline, *pipelinetest.FakeLog, func(int)) {
	t.Helper()
	log := pipelinetest.NewFakeLog()
	p := startOnFakeLog(t, log, pipeline.Config{Catalog: pipelinetest.FakeCatalog(), Evaluator: pipelinetest.NewFakeEvaluator(), Manual: true, WatchRing: ring})
	ctx := context.Background()
	submit := func(i int) {
		t.Helper()
		h := p.SubmitAsync(ctx, pipeline.Entry{Type: "job.submit", ID: fmt.Sprintf("r%d", i), Payload: []byte(fmt.Sprintf(`{"job_id":"j%d","queue":"q%d"}`, i, i))})
		p.Flush(ctx)
		log.CommitNext()
		if o := h.Outcome(); o.Status != pipeline.StatusCommitted {
			t.Fatalf("submit %d: %s", i, o)
		}
	}
	return p, log, submit
}
