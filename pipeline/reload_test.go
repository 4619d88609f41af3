package pipeline_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/writ-dev/writ/examples/jobs/jobsgen"
	"github.com/writ-dev/writ/pipeline"
	"github.com/writ-dev/writ/pipeline/pipelinetest"
)

const reloadDoc = `{"version":"1.%s","settings":{"commit_timeout":"5s","max_batch":64,"log_level":"debug"}}`

// TestConfigReplyAfterReloadHook_BothOrders_FakeLog: a COMMITTED
// configuration change has been reloaded on the replying node, whether the
// log tells the observer before it wakes the proposal's waiter (raftstore's
// order) or after. The hook is slow so that a reply that does not wait for
// it is seen every time.
func TestConfigReplyAfterReloadHook_BothOrders_FakeLog(t *testing.T) {
	for _, waiterFirst := range []bool{false, true} {
		t.Run(fmt.Sprintf("waiterFirst=%v", waiterFirst), func(t *testing.T) {
			log := pipelinetest.NewFakeLog()
			log.WakeWaiterFirst = waiterFirst
			var reloaded atomic.Int32
			p := startOnFakeLog(t, log, pipeline.Config{Catalog: jobsgen.Catalog(), Evaluator: pipelinetest.NewFakeEvaluator(),
				TickInterval: time.Millisecond,
				OnConfigActivated: func(a pipeline.ConfigActivation) {
					time.Sleep(30 * time.Millisecond)
					reloaded.Add(1)
				}})
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			wg.Add(1)
			go committer(ctx, log, &wg)
			defer func() { cancel(); wg.Wait() }()
			for i := 1; i <= 3; i++ {
				id := fmt.Sprintf("v%d", i)
				o := p.ConfigUpgrade(context.Background(), pipeline.Entry{Type: "cluster.config", ID: id, Payload: []byte(fmt.Sprintf(reloadDoc, id[1:]))})
				if o.Status != pipeline.StatusCommitted {
					t.Fatalf("%s: %s", id, o)
				}
				if n := reloaded.Load(); n != int32(i) {
					t.Fatalf("%s answered COMMITTED after %d reload(s), want %d: the reply raced ahead of the reload hook", id, n, i)
				}
			}
		})
	}
}

// TestReloadAfterSnapshotRestore_FakeLog: an activation the node learns of
// only through a restored state (CommitSilently: Restored, no Applied) runs
// the reload hook once, before its requester is answered; restoring again
// does not run it twice.
func TestReloadAfterSnapshotRestore_FakeLog(t *testing.T) {
	log := pipelinetest.NewFakeLog()
	var mu sync.Mutex
	var reloads []string
	p := startOnFakeLog(t, log, pipeline.Config{Catalog: jobsgen.Catalog(), Evaluator: pipelinetest.NewFakeEvaluator(),
		TickInterval: time.Millisecond, ConfigTimeout: time.Minute,
		OnConfigActivated: func(a pipeline.ConfigActivation) {
			mu.Lock()
			reloads = append(reloads, fmt.Sprintf("%s@%d", a.ID, a.Generation))
			mu.Unlock()
		}})
	ctx := context.Background()
	got := func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), reloads...) }
	for i, silent := range []bool{false, true, true} {
		id := fmt.Sprintf("v%d", i+1)
		h := p.ConfigUpgradeAsync(ctx, pipeline.Entry{Type: "cluster.config", ID: id, Payload: []byte(fmt.Sprintf(reloadDoc, id[1:]))})
		// commit what the pipeline proposes (stage, activation, any
		// re-proposal) until it answers; silently: as a node catching up
		// by snapshot, which hears only Restored
		commit := log.CommitNext
		if silent {
			commit = log.CommitSilently
		}
		deadline := time.Now().Add(5 * time.Second)
	wait:
		for {
			select {
			case <-h.Done():
				break wait
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: no outcome", id)
			}
			if !commit() {
				time.Sleep(time.Millisecond)
			}
		}
		if o := h.Outcome(); o.Status != pipeline.StatusCommitted {
			t.Fatalf("%s: %s", id, o)
		}
		want := fmt.Sprintf("%s@%d", id, i+1)
		if g := got(); len(g) != i+1 || g[i] != want {
			t.Fatalf("%s answered COMMITTED (activation restored=%v) with reloads %v, want the last to be %s", id, silent, g, want)
		}
	}
	p.Restored(log.Index()) // the same state again: nothing new to reload
	if g := fmt.Sprint(got()); g != "[v1@1 v2@2 v3@3]" {
		t.Fatalf("reloads %s", g)
	}
}
