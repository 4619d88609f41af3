package pipeline_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/writ-dev/writ/examples/jobs/jobsgen"
	"github.com/writ-dev/writ/pipeline"
	"github.com/writ-dev/writ/pipeline/pipelinetest"
)

// TestConfigDocAtDeclaredKey_FakeLog: an activation writes the document to
// the config type's declared key (where handlers read the active
// configuration), and watchers see the stage and activate commands under
// the config type.
func TestConfigDocAtDeclaredKey_FakeLog(t *testing.T) {
	log := pipelinetest.NewFakeLog()
	p := startOnFakeLog(t, log, pipeline.Config{Catalog: jobsgen.Catalog(), Evaluator: pipelinetest.NewFakeEvaluator(), TickInterval: time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	var cwg sync.WaitGroup
	cwg.Add(1)
	go committer(ctx, log, &cwg)
	defer func() { cancel(); cwg.Wait(); p.Stop() }()
	for i, doc := range []string{
		`{"version":"2","settings":{"commit_timeout":"5s","max_batch":64,"log_level":"info"}}`,
		`{"version":"3","settings":{"commit_timeout":"4s","max_batch":32,"log_level":"warn"}}`,
	} {
		id := []string{"c2", "c3"}[i]
		if o := p.ConfigUpgrade(context.Background(), pipeline.Entry{Type: "cluster.config", ID: id, Payload: []byte(doc)}); o.Status != pipeline.StatusCommitted {
			t.Fatalf("config upgrade %s: %s", id, o)
		}
		rec, ok, err := log.Get(context.Background(), "_config/cluster", false)
		if err != nil || !ok || string(rec.Value) != doc {
			t.Fatalf("_config/cluster after %s = %q %v %v, want the activated document", id, rec.Value, ok, err)
		}
	}
	w := p.Watch(1, pipeline.Filter{Types: []string{"cluster.config"}})
	wctx, wcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer wcancel()
	// An activation can be proposed a second time when its first commit
	// and the driver's re-check cross (the second is a recorded duplicate:
	// the first activation in the log wins); the watch then shows its ID
	// twice in a row. The order of distinct commands is what this test pins.
	var ids []string
	var last uint64
	for len(ids) < 4 {
		ev, err := w.Next(wctx)
		if err != nil {
			t.Fatalf("watch after %v: %v", ids, err)
		}
		if len(ids) > 0 && ids[len(ids)-1] == ev.ID {
			// Only a recorded duplicate of the command just seen may
			// repeat it; a second applied activation fails the test.
			if !ev.Duplicate || ev.FirstIndex != last {
				t.Fatalf("watch repeats %s at index %d without being a duplicate of index %d: %+v", ev.ID, ev.Index, last, ev)
			}
			continue
		}
		ids = append(ids, ev.ID)
		last = ev.Index
	}
	want := []string{"cfg:c2:stage", "cfg:c2:activate", "cfg:c3:stage", "cfg:c3:activate"}
	for i := range want {
		if ids[i] != want[i] {
			t.Fatalf("watch --type cluster.config: %v, want %v", ids, want)
		}
	}
}
