package pipeline_test

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/writ-dev/writ/examples/jobs/jobsgen"
	"github.com/writ-dev/writ/kv"
	"github.com/writ-dev/writ/pipeline"
	"github.com/writ-dev/writ/pipeline/pipelinetest"
	"github.com/writ-dev/writ/raftstore"
)

// Loopback addresses for this test: 127.0.12.1–127.0.12.3, kernel-chosen
// ports.

// restoreRecorder is a node's pipeline as the log's observer, recording
// every Restored call (the log's report of a state it did not apply entry
// by entry: the one loaded at open, and each snapshot it installs).
type restoreRecorder struct {
	*pipeline.Pipeline
	mu       *sync.Mutex
	restores *[]uint64
}

func (r restoreRecorder) Restored(index uint64) {
	r.mu.Lock()
	*r.restores = append(*r.restores, index)
	r.mu.Unlock()
	r.Pipeline.Restored(index)
}

var _ kv.RestoreObserver = restoreRecorder{}

// TestLaggingFollowerReloadsAfterSnapshot_RaftCluster (issue 13, defect 5):
// a follower is down while a configuration change activates and the leader
// compacts its log past it, so it catches up by installing a snapshot. It
// must run the reload hook for the activation the snapshot carries, not
// only report the new tag. Over a real 3-node raftstore cluster.
func TestLaggingFollowerReloadsAfterSnapshot_RaftCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("real cluster")
	}
	var mu sync.Mutex
	restores := map[string]*[]uint64{}
	c := newRaftClusterWith(t, "127.0.12.%d", func(cfg *raftstore.Config) {
		cfg.SnapshotCount, cfg.SnapshotCatchUp = 20, 5
	}, func(n *rnode, p *pipeline.Pipeline) kv.ApplyObserver {
		mu.Lock()
		defer mu.Unlock()
		if restores[n.cfg.NodeID] == nil {
			restores[n.cfg.NodeID] = new([]uint64)
		}
		return restoreRecorder{Pipeline: p, mu: &mu, restores: restores[n.cfg.NodeID]}
	})
	lead := c.leader(10 * time.Second)
	lag := (lead + 1) % 3
	ln := c.nodes[lag]
	c.stop(lag)
	ctx := context.Background()
	doc := `{"version":"7","settings":{"commit_timeout":"5s","max_batch":64,"log_level":"debug"}}`
	o := c.nodes[lead].p.ConfigUpgrade(ctx, pipeline.Entry{Type: "cluster.config", ID: "v7", Payload: []byte(doc)})
	if o.Status != pipeline.StatusCommitted {
		t.Fatalf("config upgrade with one follower down: %s", o)
	}
	activatedAt := o.Index
	for i := range 80 {
		if o := submit(c.nodes[lead].p, "job.submit", fmt.Sprintf("s%d", i), fmt.Sprintf(`{"job_id":"j%d","queue":"q","priority":1,"command":"x"}`, i)); o.Status != pipeline.StatusCommitted {
			t.Fatalf("submit %d: %s", i, o)
		}
	}
	mu.Lock()
	*restores[ln.cfg.NodeID] = nil
	mu.Unlock()
	c.start(lag)
	c.eventually("job/j79", `{"job_id":"j79","queue":"q","priority":1,"command":"x"}`)

	deadline := time.Now().Add(10 * time.Second)
	for {
		ln.mu.Lock()
		got := append([]string(nil), ln.reloads...)
		ln.mu.Unlock()
		tag, ok, err := ln.p.CommittedConfig(ctx, false)
		if err != nil || !ok || tag.ID != "v7" {
			t.Fatalf("%s: committed tag %+v %v %v, want v7", ln.cfg.NodeID, tag, ok, err)
		}
		if len(got) == 1 && got[0] == "v7" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s reports tag v7 but its reload hook ran for %v: the activation it caught up on was never reloaded", ln.cfg.NodeID, got)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The follower did catch up by snapshot: after the state it loaded at
	// open, the log reported a restored state beyond the activation.
	mu.Lock()
	rs := append([]uint64(nil), *restores[ln.cfg.NodeID]...)
	mu.Unlock()
	snap := false
	for _, idx := range rs[min(1, len(rs)):] {
		snap = snap || idx > activatedAt
	}
	if !snap {
		t.Fatalf("%s did not catch up by snapshot (restores %v, activation at %d): the test did not exercise the restore", ln.cfg.NodeID, rs, activatedAt)
	}
	t.Logf("%s: activation at %d, restores %v, reloads %v", ln.cfg.NodeID, activatedAt, rs, ln.reloads)
}

// startSingleNode runs a pipeline over a one-voter raftstore in dir
// (127.0.12.1, kernel-chosen port) until the test ends or stop is called.
func startSingleNode(t *testing.T, dir string, hook func(pipeline.ConfigActivation)) (p *pipeline.Pipeline, stop func()) {
	t.Helper()
	p, err := pipeline.New(pipeline.Config{NodeID: "n1", Catalog: jobsgen.Catalog(), Evaluator: pipelinetest.NewFakeEvaluator(),
		DataDir: filepath.Join(dir, "pipeline"), CommitTimeout: 10 * time.Second, ConfigTimeout: 10 * time.Second,
		TickInterval: 5 * time.Millisecond, Logger: quiet(), OnConfigActivated: hook})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.12.1:0")
	if err != nil {
		t.Fatal(err)
	}
	node, err := raftstore.Start(raftstore.Config{NodeID: "n1", DataDir: filepath.Join(dir, "raft"), RaftAddr: l.Addr().String(), Listener: l,
		Peers: []raftstore.Peer{{ID: "n1", Addr: l.Addr().String()}}, Checker: p.Checker(), Observer: p, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	p.SetLog(node)
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	stop = func() { once.Do(func() { p.Stop(); node.Stop(); <-node.Done() }) }
	t.Cleanup(stop)
	for deadline := time.Now().Add(10 * time.Second); !node.IsLeader(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no leader")
		}
	}
	return p, stop
}

// TestReloadAtStartWhenHookNeverRan_Raftstore: the log applies an
// activation to its state before the observer hears of it, so a node can
// stop with the activation applied and its hook not run. When it starts
// again it reloads the committed configuration. Over a real raftstore
// (bbolt state, WAL) restarted on the same data directory.
func TestReloadAtStartWhenHookNeverRan_Raftstore(t *testing.T) {
	dir := t.TempDir()
	p, stop := startSingleNode(t, dir, nil) // no hook: as if the node stopped before it ran
	doc := `{"version":"3","settings":{"commit_timeout":"5s","max_batch":64,"log_level":"debug"}}`
	if o := p.ConfigUpgrade(context.Background(), pipeline.Entry{Type: "cluster.config", ID: "v3", Payload: []byte(doc)}); o.Status != pipeline.StatusCommitted {
		t.Fatalf("config upgrade: %s", o)
	}
	stop()
	var mu sync.Mutex
	var reloads []string
	startSingleNode(t, dir, func(a pipeline.ConfigActivation) {
		mu.Lock()
		reloads = append(reloads, fmt.Sprintf("%s@%d", a.ID, a.Generation))
		mu.Unlock()
	})
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(reloads) != "[v3@1]" {
		t.Fatalf("after restart the reload hook ran for %v, want [v3@1]: the node never reloaded its committed configuration", reloads)
	}
}
