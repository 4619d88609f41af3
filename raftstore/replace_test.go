package raftstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/writ-dev/writ/internal/proctest"
	"github.com/writ-dev/writ/kv"
)

// replaceNet is the /24 of the replacement tests (WRITTEST_REPLACE_NET
// moves it).
func replaceNet() string {
	if v := os.Getenv("WRITTEST_REPLACE_NET"); v != "" {
		return v
	}
	return "127.0.98"
}

// TestMemberReplacedUnderItsOwnNameCatchesUpFromTheLog rebuilds members
// the way docs/operator.md says: the leader removes the member (it stops
// with ErrRemoved), its data directory is deleted, it starts again as a
// joiner under the same name and address, and the leader adds it back as
// a learner naming its new incarnation. Snapshots are rare, so the new
// member catches up from log entries, which hold its predecessor's
// removal: it must apply that removal without stopping, reach the entry
// that adds it, be promoted, serve, and survive a restart. It is done for
// a joined member (n3) and for the bootstrap member (n1, whose seat came
// from the single-node bootstrap), each under traffic.
func TestMemberReplacedUnderItsOwnNameCatchesUpFromTheLog(t *testing.T) {
	c := newReplaceCluster(t, 1<<20, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c.replace(ctx, 2)
	c.replace(ctx, 0)
}

// TestMemberReplacedUnderItsOwnNameCatchesUpBySnapshot is the same with
// a compacted log: a configuration change is then followed by a snapshot
// (maybeSnapshot), so the rebuilt member installs one taken after its
// predecessor's removal and its own addition. The member table it
// restores must name its new incarnation, so that it is promoted, survives
// a restart, and stops with ErrRemoved when that incarnation is removed.
func TestMemberReplacedUnderItsOwnNameCatchesUpBySnapshot(t *testing.T) {
	const every = 40
	c := newReplaceCluster(t, every, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	l := c.nodes[c.leader(20*time.Second)]
	for i := 0; l.snapIndex.Load() == 0; i++ {
		if i > 2*every {
			t.Fatalf("no snapshot after %d entries", i)
		}
		mustPropose(t, l, put(fmt.Sprintf("fill-%d", i), fmt.Sprintf("k/fill/%03d", i), "v"))
	}
	name, addr, old := c.nodes[2].ID(), c.nodes[2].Addr(), c.nodes[2].Incarnation()
	if err := l.Remove(ctx, name); err != nil {
		t.Fatal(err)
	}
	removal := l.Status().Commit
	proctest.WaitFor(t, 20*time.Second, name+" stops on its removal", func() bool { return !c.alive(2) })
	for i := range 5 {
		mustPropose(t, l, put(fmt.Sprintf("between-%d", i), fmt.Sprintf("k/between/%d", i), "v"))
	}
	if err := os.RemoveAll(c.cfgs[2].DataDir); err != nil {
		t.Fatal(err)
	}
	c.cfgs[2].RaftAddr = addr
	n := c.start(2)
	if n.Incarnation() == 0 || n.Incarnation() == old {
		t.Fatalf("rebuilt %s has incarnation %x (its predecessor's: %x)", name, n.Incarnation(), old)
	}
	if err := l.AddLearnerIncarnation(ctx, name, n.Addr(), n.Incarnation()); err != nil {
		t.Fatal(err)
	}
	want := l.Status().Commit
	proctest.WaitFor(t, 60*time.Second, name+" catches up", func() bool { return !c.alive(2) || n.applied.Load() >= want })
	if !c.alive(2) {
		t.Fatalf("rebuilt %s stopped while catching up: %v", name, n.Err())
	}
	if got := n.snapIndex.Load(); got <= removal {
		t.Fatalf("rebuilt %s restored no snapshot after the removal at %d (snapshot index %d)", name, removal, got)
	}
	if m := memberOf(n, name); m.Incarnation != n.Incarnation() {
		t.Fatalf("rebuilt %s's restored member table names it %+v, want incarnation %x", name, m, n.Incarnation())
	}
	proctest.WaitFor(t, 20*time.Second, "the leader sees "+name+"'s progress", func() bool { return memberOf(l, name).Match >= want })
	if err := l.Promote(ctx, name); err != nil {
		t.Fatal(err)
	}
	c.stop(2)
	n = c.start(2)
	mustPropose(t, l, put(name+"-restarted", "k/restarted", "1"))
	c.converge(60 * time.Second)
	if !c.alive(2) || !memberOf(n, name).Voter {
		t.Fatalf("%s after its restart: alive %v, members %+v", name, c.alive(2), n.Members())
	}
	if err := l.Remove(ctx, name); err != nil {
		t.Fatal(err)
	}
	proctest.WaitFor(t, 20*time.Second, name+" stops on the removal of its own incarnation", func() bool { return !c.alive(2) })
	if !errors.Is(n.Err(), ErrRemoved) {
		t.Fatalf("%s stopped with %v, want ErrRemoved", name, n.Err())
	}
}

// newReplaceCluster starts n1 as a single-node bootstrap and adds n2 and
// n3 as joiners with their incarnations, every node snapshotting every
// snapEvery entries and keeping catchUp behind (0: the default).
func newReplaceCluster(t *testing.T, snapEvery, catchUp uint64) *cluster {
	return newReplaceClusterHooks(t, snapEvery, catchUp, nil)
}

// newReplaceClusterHooks is newReplaceCluster with test hooks on every node.
func newReplaceClusterHooks(t *testing.T, snapEvery, catchUp uint64, hooks *testHooks) *cluster {
	c := newClusterOn(t, replaceNet(), 1, func(_ int, cfg *Config) {
		cfg.Peers, cfg.SnapshotCount, cfg.SnapshotCatchUp = nil, snapEvery, catchUp
		cfg.hooks = hooks
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l := c.nodes[c.leader(20*time.Second)]
	for i := 2; i <= 3; i++ {
		lis := listen(t, fmt.Sprintf("%s.%d", replaceNet(), i))
		c.cfgs = append(c.cfgs, Config{NodeID: fmt.Sprintf("n%d", i), DataDir: filepath.Join(filepath.Dir(c.cfgs[0].DataDir), fmt.Sprintf("n%d", i)), RaftAddr: lis.Addr().String(),
			Listener: lis, Join: true, SnapshotCount: snapEvery, SnapshotCatchUp: catchUp, Logger: testLogger(t), hooks: hooks})
		c.nodes = append(c.nodes, nil)
		j := c.start(i - 1)
		if err := l.AddLearnerIncarnation(ctx, j.ID(), j.Addr(), j.Incarnation()); err != nil {
			t.Fatal(err)
		}
		if err := l.Promote(ctx, j.ID()); err != nil {
			t.Fatal(err)
		}
	}
	for i := range c.nodes {
		if c.nodes[i].Incarnation() == 0 {
			t.Fatalf("%s has no incarnation", c.nodes[i].ID())
		}
	}
	return c
}

// replace rebuilds member v under its own name and address (see
// TestMemberReplacedUnderItsOwnNameCatchesUpFromTheLog).
func (c *cluster) replace(ctx context.Context, v int) {
	t := c.t
	name, addr, old := c.nodes[v].ID(), c.nodes[v].Addr(), c.nodes[v].Incarnation()
	li := c.leader(20 * time.Second)
	if li == v {
		to := (v + 1) % len(c.nodes)
		if err := c.nodes[li].TransferLeadership(ctx, c.nodes[to].ID()); err != nil {
			t.Fatal(err)
		}
		li = c.leader(20 * time.Second)
	}
	l := c.nodes[li]
	traffic := func(tag string, n int) {
		for i := range n {
			mustPropose(t, l, put(fmt.Sprintf("%s-%s-%d", name, tag, i), fmt.Sprintf("k/%s/%s/%02d", name, tag, i), "v"))
		}
	}
	traffic("before", 20)
	// Another incarnation cannot take the seat of one the configuration holds.
	if err := l.AddLearnerIncarnation(ctx, name, addr, old+1); err == nil || !strings.Contains(err.Error(), "remove that earlier incarnation first") {
		t.Fatalf("adding another incarnation of %s while it is a member: %v", name, err)
	}
	if err := l.Remove(ctx, name); err != nil {
		t.Fatal(err)
	}
	// The removed member stops: its removal names its own incarnation.
	proctest.WaitFor(t, 20*time.Second, name+" stops on its removal", func() bool { return !c.alive(v) })
	if !errors.Is(c.nodes[v].Err(), ErrRemoved) {
		t.Fatalf("%s stopped with %v, want ErrRemoved", name, c.nodes[v].Err())
	}
	traffic("between", 20)

	// Rebuild: delete the data directory, start again as a joiner under the
	// same name and address.
	if err := os.RemoveAll(c.cfgs[v].DataDir); err != nil {
		t.Fatal(err)
	}
	c.cfgs[v].Peers, c.cfgs[v].Join, c.cfgs[v].RaftAddr = nil, true, addr
	n := c.start(v)
	if n.Incarnation() == 0 || n.Incarnation() == old {
		t.Fatalf("rebuilt %s has incarnation %x (its predecessor's: %x)", name, n.Incarnation(), old)
	}
	if err := l.AddLearnerIncarnation(ctx, name, n.Addr(), n.Incarnation()); err != nil {
		t.Fatal(err)
	}
	traffic("after", 20)
	want := l.Status().Commit
	proctest.WaitFor(t, 60*time.Second, name+" catches up", func() bool {
		return !c.alive(v) || n.applied.Load() >= want
	})
	if !c.alive(v) {
		t.Fatalf("rebuilt %s stopped while catching up: %v", name, n.Err())
	}
	if s := n.snapIndex.Load(); s != 0 {
		t.Fatalf("rebuilt %s restored a snapshot at %d; the test needs it to catch up from log entries", name, s)
	}
	rec, ok, err := n.Get(ctx, fmt.Sprintf("k/%s/between/00", name), false)
	if err != nil || !ok || string(rec.Value) != "v" {
		t.Fatalf("rebuilt %s lacks an entry written while it was out: %v %v %v", name, rec, ok, err)
	}
	proctest.WaitFor(t, 20*time.Second, "the leader sees "+name+"'s progress", func() bool { return memberOf(l, name).Match >= want })
	if err := l.Promote(ctx, name); err != nil {
		t.Fatal(err)
	}
	if m := memberOf(l, name); !m.Voter || m.Incarnation != n.Incarnation() {
		t.Fatalf("%s after promotion: %+v, want a voter of incarnation %x", name, m, n.Incarnation())
	}
	mustPropose(t, n, put(name+"-served", "k/"+name+"/served", "1"))
	c.converge(60 * time.Second)
	// A restart replays the predecessor's removal from the log again.
	inc := n.Incarnation()
	c.stop(v)
	n = c.start(v)
	if n.Incarnation() != inc {
		t.Fatalf("%s's incarnation changed across a restart: %x, was %x", name, n.Incarnation(), inc)
	}
	// A proposal forwarded before the stream to the leader is up may be
	// dropped unanswered: wait until the leader hears from it.
	proctest.WaitFor(t, 30*time.Second, name+" back in touch with the leader", func() bool {
		ld := c.nodes[c.leader(20*time.Second)]
		return n.Status().LeaderID != "" && memberOf(ld, name).Match >= ld.Status().Commit
	})
	mustPropose(t, n, put(name+"-restarted", "k/"+name+"/restarted", "1"))
	c.converge(60 * time.Second)
	if !c.alive(v) || !memberOf(n, name).Voter {
		t.Fatalf("%s after its restart: alive %v, members %+v", name, c.alive(v), n.Members())
	}
}

func memberOf(n *Node, id string) kv.Member {
	for _, m := range n.Members() {
		if m.ID == id {
			return m
		}
	}
	return kv.Member{}
}
