package raftstore

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/writ-dev/writ/internal/proctest"
	"github.com/writ-dev/writ/kv"
)

// idObserver records, per Applied call, the index and the command IDs.
type idObserver struct {
	mu    sync.Mutex
	calls []observedBatch
}

type observedBatch struct {
	index    uint64
	ids      []string
	restored bool // a Restored call, not Applied
}

// Restored makes idObserver a kv.RestoreObserver, as the pipeline is.
func (o *idObserver) Restored(index uint64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.calls = append(o.calls, observedBatch{index: index, restored: true})
}

func (o *idObserver) Applied(index uint64, batch []kv.Command, _ []kv.Result) {
	ids := make([]string, len(batch))
	for i := range batch {
		ids[i] = batch[i].ID
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.calls = append(o.calls, observedBatch{index: index, ids: ids})
}

func (o *idObserver) snapshot() []observedBatch {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.calls)
}

// A follower's proposal commits while the leader's messages to that
// follower are lost; the follower then learns the entry only from a
// snapshot. Its waiter must end with the recorded outcome, and its observer
// must hear where the restored state is (without per-entry batches for
// what the snapshot covers).
func TestSnapshotRestoreSettlesWaitersAndTellsTheObserver(t *testing.T) {
	var cutFrom, cutTo atomic.Uint64 // raft IDs; 0: no partition
	obs := make([]*idObserver, 3)
	c := newCluster(t, 3, func(i int, cfg *Config) {
		cfg.SnapshotCount = 20
		cfg.SnapshotCatchUp = 5
		obs[i] = &idObserver{}
		cfg.Observer = obs[i]
		cfg.hooks = &testHooks{dropMessage: func(m *raftpb.Message) bool {
			return m.GetFrom() == cutFrom.Load() && m.GetTo() == cutTo.Load()
		}}
	})
	li := c.leader(10 * time.Second)
	fi := (li + 1) % 3
	l, f := c.nodes[li], c.nodes[fi]
	mustPropose(t, l, put("before", "k/before", "v"))
	c.converge(10 * time.Second)

	// Cut the leader → follower direction only: the follower still
	// forwards its proposal to the leader, which commits it with the third
	// node, but the follower never receives the entry.
	cutTo.Store(f.id)
	cutFrom.Store(l.id)
	type waited struct {
		res []kv.Result
		err error
	}
	waitc := make(chan waited, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	p, err := f.Propose(ctx, []kv.Command{put("settle-me", "k/settle", "v")})
	if err != nil {
		t.Fatalf("propose on the follower: %v", err)
	}
	go func() {
		res, err := p.Wait(ctx)
		waitc <- waited{res, err}
	}()
	var committed kv.Result
	proctest.WaitFor(t, 10*time.Second, "the follower's proposal applied on the leader", func() bool {
		r, ok := l.Outcome("settle-me")
		committed = r
		return ok && r.Status == kv.StatusApplied
	})
	// Move the leader's log past it: snapshots and compaction.
	for i := range 60 {
		mustPropose(t, l, put(fmt.Sprintf("after-%d", i), fmt.Sprintf("k/after/%d", i), "v"))
	}
	if first, _ := l.storage.FirstIndex(); first <= committed.Index {
		t.Fatalf("leader log not compacted past index %d (first index %d)", committed.Index, first)
	}
	if f.applied.Load() >= committed.Index {
		t.Fatalf("follower applied %d while cut off; the entry at %d reached it", f.applied.Load(), committed.Index)
	}
	select {
	case w := <-waitc:
		t.Fatalf("waiter finished while the follower was cut off: %+v %v", w.res, w.err)
	default:
	}

	// Heal: the follower catches up by snapshot.
	cutFrom.Store(0)
	cutTo.Store(0)
	var w waited
	select {
	case w = <-waitc:
	case <-time.After(20 * time.Second):
		t.Fatalf("waiter not settled after the partition healed (follower applied %d, snapshot %d)", f.applied.Load(), f.snapIndex.Load())
	}
	if w.err != nil {
		t.Fatalf("wait: %v", w.err)
	}
	if len(w.res) != 1 || w.res[0].Status != kv.StatusApplied || w.res[0].Index != committed.Index {
		t.Fatalf("settled with %+v, want the recorded outcome %+v", w.res, committed)
	}
	if f.snapIndex.Load() < committed.Index {
		t.Fatalf("follower did not restore a snapshot covering %d (snapshot index %d)", committed.Index, f.snapIndex.Load())
	}
	c.converge(20 * time.Second)

	// The observer heard of the restored index through Restored, never of
	// the entry itself, and always in log order.
	calls := obs[fi].snapshot()
	restored := false
	for i, b := range calls {
		if slices.Contains(b.ids, "settle-me") {
			t.Fatalf("follower observer saw the entry itself at %d; it was expected to come by snapshot", b.index)
		}
		if b.restored && b.index >= committed.Index {
			restored = true
		}
		if i > 0 && b.index <= calls[i-1].index {
			t.Fatalf("observer out of order: %d after %d", b.index, calls[i-1].index)
		}
	}
	if !restored {
		t.Fatalf("follower observer was not told of the snapshot restore: %+v", calls)
	}
}

// A kv.RestoreObserver hears where the loaded state stands when the node
// opens, before any Applied call: 0 for a new node, the applied index after
// a restart. Entries applied before it were never reported to it, so a
// watch built on the observer knows where its feed begins.
func TestObserverToldOfLoadedStateAtOpen(t *testing.T) {
	obs := &idObserver{}
	c := newCluster(t, 1, func(_ int, cfg *Config) { cfg.Observer = obs })
	n := c.nodes[c.leader(10*time.Second)]
	mustPropose(t, n, put("a", "k/a", "1"))
	last := mustPropose(t, n, put("b", "k/b", "2"))[0].Index
	calls := obs.snapshot()
	if len(calls) < 3 || !calls[0].restored || calls[0].index != 0 {
		t.Fatalf("new node: want Restored(0) before any Applied, got %+v", calls)
	}
	c.stop(0)
	*obs = idObserver{}
	n = c.start(0)
	c.leader(10 * time.Second)
	mustPropose(t, n, put("c", "k/c", "3"))
	calls = obs.snapshot()
	if len(calls) < 2 || !calls[0].restored || calls[0].index < last {
		t.Fatalf("restarted node: want Restored(>= %d) first, got %+v", last, calls)
	}
	for _, b := range calls[1:] {
		if b.restored || b.index <= calls[0].index {
			t.Fatalf("after the open call: %+v (all %+v)", b, calls)
		}
	}
}
