package raftstore

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"
)

// TestRestartWithStateAheadOfItsSnapshot restarts a node whose state is
// more than a snapshot interval ahead of the newest snapshot it kept, as
// when the snapshot after it failed (its state sync hit EIO) or the node
// died between the state's commit and the snapshot's save. Raft hands the
// log after the kept snapshot out again, a few entries a Ready; the first
// apply finds a snapshot due and compacts the log. That compaction must
// not reach entries raft has not handed out yet: a robustness run saw
// raft panic ("requested index is unavailable due to compaction").
func TestRestartWithStateAheadOfItsSnapshot(t *testing.T) {
	c := newCluster(t, 1, func(_ int, cfg *Config) {
		cfg.SnapshotCount = 10
		cfg.SnapshotCatchUp = 1
		cfg.MaxBatchBytes = 256 // a few entries a Ready
	})
	l := c.nodes[c.leader(10*time.Second)]
	for i := range 45 {
		mustPropose(t, l, put(fmt.Sprintf("id%d", i), fmt.Sprintf("k/%02d", i), "v"))
	}
	c.stop(0)
	snaps, err := filepath.Glob(filepath.Join(c.cfgs[0].DataDir, "snap", "*.snap"))
	if err != nil || len(snaps) < 2 {
		t.Fatalf("snapshot files %v (%v): want at least 2", snaps, err)
	}
	sort.Strings(snaps)
	if err := os.Remove(snaps[len(snaps)-1]); err != nil {
		t.Fatal(err)
	}
	n := c.start(0)
	c.leader(10 * time.Second)
	for i := 45; i < 60; i++ {
		mustPropose(t, n, put(fmt.Sprintf("id%d", i), fmt.Sprintf("k/%02d", i), "v"))
	}
	for i := range 60 {
		if r, ok, err := n.Get(context.Background(), fmt.Sprintf("k/%02d", i), false); err != nil || !ok || string(r.Value) != "v" {
			t.Fatalf("k/%02d after the restart: %v %v %v", i, r, ok, err)
		}
	}
}
