package raftstore

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/raft/v3"

	"github.com/writ-dev/writ/internal/proctest"
	"github.com/writ-dev/writ/kv"
)

// waitApplyError waits for n to stop and returns its ApplyError.
func waitApplyError(t *testing.T, n *Node) *ApplyError {
	t.Helper()
	select {
	case <-n.Done():
	case <-time.After(15 * time.Second):
		t.Fatal("node did not stop at the entry it cannot apply")
	}
	var ae *ApplyError
	if !errors.As(n.Err(), &ae) {
		t.Fatalf("node stopped with %v, want an ApplyError", n.Err())
	}
	return ae
}

// proposeRaw appends data to the log as a normal entry without any of
// Propose's checks, like a leader of an older build (or a forged
// proposal before the leader validated them) would.
func proposeRaw(t *testing.T, n *Node, data []byte) {
	t.Helper()
	if err := n.withRaft(func(rn *raft.RawNode) error { return rn.Propose(data) }); err != nil {
		t.Fatal(err)
	}
}

// TestUndecodableCommittedEntryIsAFatalApplyStop: a committed entry that
// does not decode stops the node with an ApplyError naming its index and
// type and saying how to recover; the restart stops at the same entry
// again instead of skipping it, and what was applied before it survives.
func TestUndecodableCommittedEntryIsAFatalApplyStop(t *testing.T) {
	c := newCluster(t, 1, nil)
	n := c.nodes[c.leader(10*time.Second)]
	res := mustPropose(t, n, put("before", "k", "v"))
	proposeRaw(t, n, []byte{9, 1, 2, 3})
	ae := waitApplyError(t, n)
	if ae.Index != res[0].Index+1 || ae.Type != "EntryNormal" || ae.Panic || ae.Commands != 0 {
		t.Fatalf("apply error %+v", ae)
	}
	msg := n.Err().Error()
	for _, want := range []string{"index " + strconv.FormatUint(ae.Index, 10), "EntryNormal", "unsupported version", "every restart", "delete its data directory", "Fatal apply stop"} {
		if !strings.Contains(msg, want) {
			t.Fatalf("fatal message lacks %q: %s", want, msg)
		}
	}
	// Waiters and new proposals learn the node stopped.
	if _, err := n.Propose(context.Background(), []kv.Command{put("after", "k2", "v")}); !errors.Is(err, kv.ErrStopped) {
		t.Fatalf("propose after the stop: %v", err)
	}
	n = c.start(0)
	if again := waitApplyError(t, n); again.Index != ae.Index {
		t.Fatalf("restart stopped at %d, first stop at %d", again.Index, ae.Index)
	}
}

// panicObserver panics when it is told about a command of type "boom".
type panicObserver struct {
	mu   sync.Mutex
	seen []string
	boom bool
}

func (o *panicObserver) Applied(_ uint64, batch []kv.Command, _ []kv.Result) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, c := range batch {
		if o.boom && c.Type == "boom" {
			panic("observer bug")
		}
		o.seen = append(o.seen, c.ID)
	}
}

// TestObserverPanicIsAFatalApplyStopAndReplays: an observer that panics
// on an entry stops the node with an ApplyError naming the entry and its
// command; the state is rolled back as after a crash, so the restart (with
// the observer fixed) replays the entry to the observer instead of losing
// it.
func TestObserverPanicIsAFatalApplyStopAndReplays(t *testing.T) {
	obs := &panicObserver{boom: true}
	c := newCluster(t, 1, func(_ int, cfg *Config) { cfg.Observer = obs })
	n := c.nodes[c.leader(10*time.Second)]
	mustPropose(t, n, put("before", "k", "v"))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := put("boom-1", "boom", "x")
	cmd.Type = "boom"
	p, err := n.Propose(ctx, []kv.Command{cmd})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Wait(ctx); !errors.Is(err, kv.ErrStopped) {
		t.Fatalf("wait: %v (the observer never finished, so neither may the waiter)", err)
	}
	ae := waitApplyError(t, n)
	if !ae.Panic || ae.CommandID != "boom-1" || ae.Commands != 1 || !strings.Contains(ae.Error(), "observer bug") || ae.Stack == "" {
		t.Fatalf("apply error %+v", ae)
	}
	obs.mu.Lock()
	obs.boom, obs.seen = false, nil
	obs.mu.Unlock()
	n = c.start(0)
	c.leader(10 * time.Second)
	proctest.WaitFor(t, 10*time.Second, "the entry replayed to the observer", func() bool {
		obs.mu.Lock()
		defer obs.mu.Unlock()
		for _, id := range obs.seen {
			if id == "boom-1" {
				return true
			}
		}
		return false
	})
	if _, ok, err := n.Get(ctx, "boom", true); err != nil || !ok {
		t.Fatalf("get: %v %v", ok, err)
	}
}

// TestSkipEntryRecoversAFatalApplyStop: offline recovery refuses a
// running node and an index already applied; on a stopped node it records
// the entry of the fatal apply stop, and the restarted node applies that
// entry as empty, keeps what came before it and serves again.
func TestSkipEntryRecoversAFatalApplyStop(t *testing.T) {
	c := newCluster(t, 1, nil)
	n := c.nodes[c.leader(10*time.Second)]
	res := mustPropose(t, n, put("before", "k", "v"))
	dir := c.cfgs[0].DataDir
	if err := SkipEntry(dir, res[0].Index+1); err == nil || !strings.Contains(err.Error(), "still running") {
		t.Fatalf("skip on a running node: %v", err)
	}
	proposeRaw(t, n, []byte{9, 1, 2, 3})
	ae := waitApplyError(t, n)
	if err := SkipEntry(dir, res[0].Index); err == nil || !strings.Contains(err.Error(), "already applied") {
		t.Fatalf("skip of an applied entry: %v", err)
	}
	if err := SkipEntry(dir, ae.Index); err != nil {
		t.Fatal(err)
	}
	n = c.start(0)
	c.leader(10 * time.Second)
	after := mustPropose(t, n, put("after", "k2", "v2"))
	if after[0].Status != kv.StatusApplied || after[0].Index <= ae.Index {
		t.Fatalf("after recovery: %+v", after[0])
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if rec, ok, err := n.Get(ctx, "k", true); err != nil || !ok || string(rec.Value) != "v" {
		t.Fatalf("state before the skipped entry: %v %v %q", err, ok, rec.Value)
	}
	// The record is gone once the entry is passed: a second restart
	// replays nothing as empty and stops at nothing.
	c.stop(0)
	n = c.start(0)
	c.leader(10 * time.Second)
	if n.skipIndex.Load() != 0 {
		t.Fatalf("skip record kept after it was applied: %d", n.skipIndex.Load())
	}
	mustPropose(t, n, put("again", "k3", "v3"))
}
