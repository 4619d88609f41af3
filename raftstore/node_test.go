package raftstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/storage/wal"
	"go.etcd.io/raft/v3"
	"go.uber.org/zap"

	"github.com/writ-dev/writ/internal/proctest"
	"github.com/writ-dev/writ/kv"
)

func TestSingleNodeProposeApplyRead(t *testing.T) {
	c := newCluster(t, 1, nil)
	n := c.nodes[c.leader(10*time.Second)]
	res := mustPropose(t, n, put("a", "job/1", "one"), put("b", "job/2", "two"))
	if res[0].Status != kv.StatusApplied || res[1].Status != kv.StatusApplied || res[0].Index == 0 || res[0].Index != res[1].Index {
		t.Fatalf("results %+v", res)
	}
	ctx := context.Background()
	for _, lin := range []bool{false, true} {
		rec, ok, err := n.Get(ctx, "job/1", lin)
		if err != nil || !ok || string(rec.Value) != "one" || rec.Rev != res[0].Index {
			t.Fatalf("get (linearizable=%v) = %+v %v %v", lin, rec, ok, err)
		}
	}
	recs, err := n.List(ctx, "job/", true)
	if err != nil || len(recs) != 2 || recs[0].Key != "job/1" || recs[1].Key != "job/2" {
		t.Fatalf("list = %+v %v", recs, err)
	}
	if _, ok, _ := n.Get(ctx, "missing", false); ok {
		t.Fatal("missing key found")
	}
	out, ok := n.Outcome("a")
	if !ok || out.Status != kv.StatusApplied || out.Index != res[0].Index {
		t.Fatalf("outcome %+v %v", out, ok)
	}
	st := n.Status()
	if !st.IsLeader || st.LeaderID != "n1" || st.NodeID != "n1" || st.Applied < res[0].Index || st.Term == 0 {
		t.Fatalf("status %+v", st)
	}
	// Delete with a precondition on the current revision.
	del := kv.Command{ID: "c", Effect: kv.Effect{Writes: []kv.Write{{Key: "job/1", Delete: true, IfRev: res[0].Index}}}}
	if r := mustPropose(t, n, del); r[0].Status != kv.StatusApplied {
		t.Fatalf("delete: %+v", r)
	}
	if _, ok, _ := n.Get(ctx, "job/1", true); ok {
		t.Fatal("deleted key still present")
	}
	// Restart: state and outcomes survive.
	c.stop(0)
	n = c.start(0)
	c.leader(10 * time.Second)
	if rec, ok, _ := n.Get(ctx, "job/2", false); !ok || string(rec.Value) != "two" {
		t.Fatalf("after restart: %+v %v", rec, ok)
	}
	if out, ok := n.Outcome("b"); !ok || out.Status != kv.StatusApplied {
		t.Fatalf("outcome after restart %+v %v", out, ok)
	}
	// GetMany reads present and absent keys in one transaction, as Get does.
	keys := []string{"job/2", "job/1", "missing"}
	dst := make([]kv.Record, len(keys))
	if err := n.GetMany(ctx, keys, dst); err != nil {
		t.Fatal(err)
	}
	want, _, _ := n.Get(ctx, "job/2", false)
	if dst[0].Key != "job/2" || string(dst[0].Value) != "two" || dst[0].Rev != want.Rev || dst[0].Rev == 0 {
		t.Fatalf("GetMany present key: %+v, Get says %+v", dst[0], want)
	}
	for _, r := range dst[1:] {
		if r.Rev != 0 || r.Value != nil || (r.Key != "job/1" && r.Key != "missing") {
			t.Fatalf("GetMany absent key: %+v", r)
		}
	}
	if err := n.GetMany(ctx, keys, dst[:1]); err == nil {
		t.Fatal("GetMany accepted a destination shorter than its keys")
	}
}

func TestCASConflictIsTheSameNoOpOnEveryReplica(t *testing.T) {
	c := newCluster(t, 3, nil)
	l := c.nodes[c.leader(10*time.Second)]
	r := mustPropose(t, l, kv.Command{ID: "create", Effect: kv.Effect{Writes: []kv.Write{{Key: "job/x", Value: []byte("v1")}}}})
	rev := r[0].Index
	// Two writers evaluated against rev; the second is stale.
	upd := func(id, v string) kv.Command {
		return kv.Command{ID: id, Effect: kv.Effect{Writes: []kv.Write{
			{Key: "queue/q", Value: []byte(v)}, // absent: precondition IfRev 0 holds
			{Key: "job/x", Value: []byte(v), IfRev: rev},
		}}}
	}
	r1 := mustPropose(t, l, upd("w1", "v2"))
	f := c.nodes[(c.leader(time.Second)+1)%3]
	// A linearizable read on a follower sees the write the leader just
	// acknowledged, without waiting for replication by other means.
	if rec, ok, err := f.Get(context.Background(), "job/x", true); err != nil || !ok || string(rec.Value) != "v2" || rec.Rev != r1[0].Index {
		t.Fatalf("linearizable follower read: %+v %v %v", rec, ok, err)
	}
	r2 := mustPropose(t, f, upd("w2", "v3")) // proposed on a follower: forwarded
	if r1[0].Status != kv.StatusApplied {
		t.Fatalf("first writer: %+v", r1)
	}
	if r2[0].Status != kv.StatusConflict {
		t.Fatalf("stale writer: %+v", r2)
	}
	for _, want := range []string{`"queue/q"`, "revision " + fmt.Sprint(r1[0].Index), "expected revision 0"} {
		if !strings.Contains(r2[0].Reason, want) {
			t.Fatalf("reason %q does not contain %q", r2[0].Reason, want)
		}
	}
	c.converge(15 * time.Second)
	for _, n := range c.nodes {
		out, ok := n.Outcome("w2")
		if !ok || out != r2[0] {
			t.Fatalf("%s recorded %+v %v, proposer saw %+v", n.ID(), out, ok, r2[0])
		}
		rec, _, _ := n.Get(context.Background(), "job/x", false)
		if string(rec.Value) != "v2" {
			t.Fatalf("%s: conflicting write applied: %q", n.ID(), rec.Value)
		}
	}
	// The proposer re-evaluates and retries with the same ID: not a duplicate.
	r3 := mustPropose(t, f, kv.Command{ID: "w2", Effect: kv.Effect{Writes: []kv.Write{{Key: "job/x", Value: []byte("v3"), IfRev: r1[0].Index}}}})
	if r3[0].Status != kv.StatusApplied {
		t.Fatalf("retry after conflict: %+v", r3)
	}
}

type vetoChecker struct{}

func (vetoChecker) Check(cmd *kv.Command, st kv.Reader) error {
	if cmd.Type == "forbidden" {
		if rec, ok := st.Get("job/guarded"); ok {
			return fmt.Errorf("job/guarded is %s", rec.Value)
		}
	}
	return nil
}

type recordingObserver struct {
	mu      sync.Mutex
	indexes []uint64
	results [][]kv.Result
}

func (o *recordingObserver) Applied(index uint64, batch []kv.Command, results []kv.Result) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.indexes = append(o.indexes, index)
	o.results = append(o.results, results)
}

func TestDedupCheckerAndObserver(t *testing.T) {
	obs := &recordingObserver{}
	c := newCluster(t, 1, func(_ int, cfg *Config) {
		cfg.Checker = vetoChecker{}
		cfg.Observer = obs
		cfg.SnapshotCount = 5
		cfg.SnapshotCatchUp = 1
	})
	n := c.nodes[c.leader(10*time.Second)]
	first := mustPropose(t, n, put("fact-1", "guard-free", "x"))
	dup := mustPropose(t, n, put("fact-1", "other", "y"))
	if dup[0].Status != kv.StatusDuplicate || dup[0].FirstIndex != first[0].Index {
		t.Fatalf("duplicate: %+v (first %+v)", dup, first)
	}
	if _, ok, _ := n.Get(context.Background(), "other", false); ok {
		t.Fatal("duplicate changed state")
	}
	mustPropose(t, n, put("g", "job/guarded", "TERMINAL"))
	rej := mustPropose(t, n, kv.Command{ID: "bad", Type: "forbidden", Effect: kv.Effect{Writes: []kv.Write{{Key: "z", Value: []byte("1"), Unconditional: true}}}})
	if rej[0].Status != kv.StatusRejected || !strings.Contains(rej[0].Reason, "job/guarded is TERMINAL") {
		t.Fatalf("veto: %+v", rej)
	}
	// Enough entries for several snapshots and log compaction.
	for i := range 20 {
		mustPropose(t, n, put(fmt.Sprintf("p%d", i), fmt.Sprintf("k/%d", i), "v"))
	}
	if n.snapIndex.Load() == 0 {
		t.Fatal("no snapshot taken")
	}
	c.stop(0)
	n = c.start(0)
	c.leader(10 * time.Second)
	dup2 := mustPropose(t, n, put("fact-1", "other", "z"))
	if dup2[0].Status != kv.StatusDuplicate || dup2[0].FirstIndex != first[0].Index {
		t.Fatalf("dedup after snapshot+restart: %+v", dup2)
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if len(obs.indexes) < 24 {
		t.Fatalf("observer saw %d entries", len(obs.indexes))
	}
	for i := 1; i < len(obs.indexes); i++ {
		if obs.indexes[i] <= obs.indexes[i-1] {
			t.Fatalf("observer out of order: %v", obs.indexes)
		}
	}
}

func TestOutcomeRetentionIsBounded(t *testing.T) {
	c := newCluster(t, 1, func(_ int, cfg *Config) { cfg.OutcomeRetention = 3 })
	n := c.nodes[c.leader(10*time.Second)]
	for i := range 5 {
		mustPropose(t, n, put(fmt.Sprintf("id%d", i), "k", "v"))
	}
	for i := range 5 {
		_, ok := n.Outcome(fmt.Sprintf("id%d", i))
		if want := i >= 2; ok != want {
			t.Fatalf("outcome id%d retained=%v, want %v", i, ok, want)
		}
	}
}

func TestThreeNodeFailoverAndRejoin(t *testing.T) {
	c := newCluster(t, 3, nil)
	li := c.leader(10 * time.Second)
	for i := range 3 {
		// Propose on every node: followers forward to the leader.
		mustPropose(t, c.nodes[i], put(fmt.Sprintf("before-%d", i), fmt.Sprintf("k/%d", i), "v"))
	}
	c.converge(15 * time.Second)
	start := time.Now()
	c.stop(li)
	nl := c.leader(10 * time.Second)
	failover := time.Since(start)
	t.Logf("failover took %v", failover)
	if nl == li {
		t.Fatal("stopped node still leader")
	}
	mustPropose(t, c.nodes[nl], put("after", "k/after", "v"))
	c.start(li)
	c.converge(20 * time.Second)
	if rec, ok, _ := c.nodes[li].Get(context.Background(), "k/after", true); !ok || string(rec.Value) != "v" {
		t.Fatalf("restarted node missing entry: %+v %v", rec, ok)
	}
}

func TestFiveNodeClusterToleratesTwoFailures(t *testing.T) {
	c := newCluster(t, 5, nil)
	li := c.leader(10 * time.Second)
	mustPropose(t, c.nodes[li], put("x", "k", "1"))
	// Kill the leader and one follower: the other three elect a new leader.
	c.stop(li)
	c.stop((li + 1) % 5)
	nl := c.leader(10 * time.Second)
	if nl == li {
		t.Fatal("stopped leader still leads")
	}
	f := (nl + 1) % 5
	for !c.alive(f) || f == nl {
		f = (f + 1) % 5
	}
	r := mustPropose(t, c.nodes[f], put("y", "k", "2")) // via a live follower
	if r[0].Status != kv.StatusApplied {
		t.Fatalf("%+v", r)
	}
	c.converge(15 * time.Second)
	// Both come back and catch up.
	c.start(li)
	c.start((li + 1) % 5)
	c.converge(20 * time.Second)
}

func TestLaggingFollowerCatchesUpBySnapshot(t *testing.T) {
	c := newCluster(t, 3, func(_ int, cfg *Config) {
		cfg.SnapshotCount = 20
		cfg.SnapshotCatchUp = 5
	})
	li := c.leader(10 * time.Second)
	lag := (li + 1) % 3
	c.stop(lag)
	for i := range 60 {
		mustPropose(t, c.nodes[li], put(fmt.Sprintf("id%d", i), fmt.Sprintf("k/%03d", i), "v"))
	}
	first, _ := c.nodes[li].storage.FirstIndex()
	if first <= 2 {
		t.Fatalf("leader log not compacted (first index %d)", first)
	}
	n := c.start(lag)
	c.converge(20 * time.Second)
	if n.snapIndex.Load() < first-1 {
		t.Fatalf("lagging follower did not restore a snapshot (snap index %d, leader first index %d)", n.snapIndex.Load(), first)
	}
	recs, _ := n.List(context.Background(), "k/", false)
	if len(recs) != 60 {
		t.Fatalf("caught-up follower has %d keys", len(recs))
	}
	// And it survives a restart after the snapshot restore.
	c.stop(lag)
	c.start(lag)
	want := c.converge(20 * time.Second)
	// A state.db behind the newest snapshot (as after a crash between
	// saving a received snapshot and restoring it) is restored from the
	// snapshot file, then the WAL tail is replayed.
	c.stop(lag)
	if err := os.Remove(filepath.Join(c.cfgs[lag].DataDir, "state.db")); err != nil {
		t.Fatal(err)
	}
	n = c.start(lag)
	if got := c.converge(20 * time.Second); got != want {
		t.Fatal("state differs after restoring from the snapshot file")
	}
	if ms := n.Members(); len(ms) != 3 {
		t.Fatalf("members after snapshot-file restore: %+v", ms)
	}
}

func TestMembershipAddLearnerPromoteTransferRemove(t *testing.T) {
	c := newCluster(t, 1, nil)
	l := c.nodes[c.leader(10*time.Second)]
	mustPropose(t, l, put("a", "k/a", "1"))
	// A joiner waits to be added.
	lis := listen(t, loopback(5))
	j, err := Start(Config{NodeID: "n5", DataDir: filepath.Join(t.TempDir(), "n5"), RaftAddr: lis.Addr().String(), Listener: lis, Join: true, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	c.nodes = append(c.nodes, j)
	c.cfgs = append(c.cfgs, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := l.AddLearner(ctx, "n5", j.Addr()); err != nil {
		t.Fatal(err)
	}
	if err := l.AddLearner(ctx, "n5", j.Addr()); err != nil {
		t.Fatalf("idempotent add: %v", err)
	}
	proctest.WaitFor(t, 10*time.Second, "learner catches up", func() bool {
		rec, ok, _ := j.Get(ctx, "k/a", false)
		return ok && string(rec.Value) == "1"
	})
	// The learner applies what it acknowledged; its acknowledgement may
	// still be on its way to the leader.
	proctest.WaitFor(t, 5*time.Second, "leader sees the learner's progress", func() bool {
		ms := l.Members()
		return len(ms) == 2 && ms[1].Match > 0
	})
	ms := l.Members()
	if len(ms) != 2 || ms[1].ID != "n5" || ms[1].Voter || ms[1].Match == 0 {
		t.Fatalf("members after add: %+v", ms)
	}
	if err := l.Promote(ctx, "n5"); err != nil {
		t.Fatal(err)
	}
	if ms := l.Members(); !ms[1].Voter {
		t.Fatalf("not promoted: %+v", ms)
	}
	mustPropose(t, j, put("b", "k/b", "2"))
	if err := l.TransferLeadership(ctx, "n5"); err != nil {
		t.Fatal(err)
	}
	if !j.IsLeader() {
		t.Fatal("transfer did not make n5 leader")
	}
	proctest.WaitFor(t, 10*time.Second, "old leader follows", func() bool { return l.Status().LeaderID == "n5" })
	if err := l.AddLearner(ctx, "n9", loopback(9)+":1"); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("conf change on follower: %v", err)
	}
	if err := j.Remove(ctx, "n5"); err == nil {
		t.Fatal("leader removed itself")
	}
	if err := j.Remove(ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	proctest.WaitFor(t, 10*time.Second, "removed node stops", func() bool {
		select {
		case <-l.Done():
			return true
		default:
			return false
		}
	})
	if !errors.Is(l.Err(), ErrRemoved) {
		t.Fatalf("removed node error: %v", l.Err())
	}
	if ms := j.Members(); len(ms) != 1 || ms[0].ID != "n5" {
		t.Fatalf("members after remove: %+v", ms)
	}
	mustPropose(t, j, put("c", "k/c", "3"))
}

func TestReplayIsIdempotent(t *testing.T) {
	c := newCluster(t, 3, nil)
	li := c.leader(10 * time.Second)
	for i := range 30 {
		mustPropose(t, c.nodes[li], put(fmt.Sprintf("id%d", i%20), fmt.Sprintf("k/%d", i%7), fmt.Sprint(i)))
	}
	// A CAS conflict and a duplicate are part of the replayed history too.
	mustPropose(t, c.nodes[li], kv.Command{ID: "stale", Effect: kv.Effect{Writes: []kv.Write{{Key: "k/1", IfRev: 1}}}})
	want := c.converge(15 * time.Second)
	f := (li + 1) % 3
	// Restart without a snapshot: entries at or below the applied index are
	// skipped, conf changes re-applied.
	c.stop(f)
	c.start(f)
	if got := c.converge(15 * time.Second); got != want {
		t.Fatal("hash changed after restart")
	}
	// Lose the applied state entirely: every committed entry is applied a
	// second time from the WAL, and the state is the same.
	c.stop(f)
	if err := os.Remove(filepath.Join(c.cfgs[f].DataDir, "state.db")); err != nil {
		t.Fatal(err)
	}
	c.start(f)
	if got := c.converge(15 * time.Second); got != want {
		t.Fatal("hash changed after re-applying the whole log")
	}
	if ms := c.nodes[f].Members(); len(ms) != 3 {
		t.Fatalf("members not rebuilt by replay: %+v", ms)
	}
}

func TestWALFailureStopsWithoutAcknowledging(t *testing.T) {
	var mu sync.Mutex
	saves, failAt := 0, 40
	c := newCluster(t, 1, func(_ int, cfg *Config) {
		cfg.hooks = &testHooks{beforeWALSave: func() error {
			mu.Lock()
			defer mu.Unlock()
			saves++
			if saves >= failAt {
				return errors.New("injected fsync error: input/output error")
			}
			return nil
		}}
	})
	n := c.nodes[c.leader(10*time.Second)]
	var wg sync.WaitGroup
	var amu sync.Mutex
	var acked []string
	var stoppedErrs int
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				key := fmt.Sprintf("k/%d/%d", w, i)
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				p, err := n.Propose(ctx, []kv.Command{put(key, key, "v")})
				if err == nil {
					var res []kv.Result
					res, err = p.Wait(ctx)
					if err == nil && res[0].Status == kv.StatusApplied {
						amu.Lock()
						acked = append(acked, key)
						amu.Unlock()
					}
				}
				cancel()
				if err != nil {
					if !errors.Is(err, kv.ErrStopped) {
						t.Errorf("unexpected error: %v", err)
					}
					amu.Lock()
					stoppedErrs++
					amu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	<-n.Done()
	if err := n.Err(); err == nil || !strings.Contains(err.Error(), "fsync") {
		t.Fatalf("node error %v does not explain the fsync failure", err)
	}
	if _, err := n.Propose(context.Background(), []kv.Command{put("late", "late", "v")}); !errors.Is(err, kv.ErrStopped) {
		t.Fatalf("propose after failure: %v", err)
	}
	if len(acked) == 0 || stoppedErrs != 8 {
		t.Fatalf("acked %d, stopped %d", len(acked), stoppedErrs)
	}
	// Restart without the fault: everything acknowledged is there.
	c.cfgs[0].hooks = nil
	n = c.start(0)
	c.leader(10 * time.Second)
	for _, k := range acked {
		if _, ok, _ := n.Get(context.Background(), k, true); !ok {
			t.Fatalf("acknowledged key %s lost", k)
		}
	}
}

func TestProposeWithoutLeaderIsDefinite(t *testing.T) {
	c := newCluster(t, 3, nil)
	li := c.leader(10 * time.Second)
	n := c.nodes[li]
	mustPropose(t, n, put("w", "w", "1"))
	c.stop((li + 1) % 3)
	c.stop((li + 2) % 3)
	// Quorum is gone. While the old leader still believes it leads, a
	// proposal is accepted but cannot commit: Wait ends with ErrUnknown.
	// Once it stepped down, Propose fails definitely with ErrNoLeader.
	ctx0, cancel0 := context.WithTimeout(context.Background(), 300*time.Millisecond)
	p, err := n.Propose(ctx0, []kv.Command{put("maybe", "maybe", "1")})
	if err == nil {
		if _, err := p.Wait(ctx0); !errors.Is(err, kv.ErrUnknown) {
			t.Fatalf("wait without quorum: %v", err)
		}
	} else if !errors.Is(err, kv.ErrNoLeader) && !errors.Is(err, kv.ErrUnknown) {
		t.Fatalf("propose without quorum: %v", err)
	}
	cancel0()
	proctest.WaitFor(t, 10*time.Second, "leader steps down (CheckQuorum)", func() bool { return !n.IsLeader() })
	proctest.WaitFor(t, 10*time.Second, "leader unknown", func() bool { return n.Status().LeaderID == "" })
	_, err = n.Propose(context.Background(), []kv.Command{put("x", "x", "1")})
	if !errors.Is(err, kv.ErrNoLeader) {
		t.Fatalf("propose without leader: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, _, err := n.Get(ctx, "x", true); err == nil {
		t.Fatal("linearizable read succeeded without quorum")
	}
}

type panicChecker struct{}

func (panicChecker) Check(cmd *kv.Command, _ kv.Reader) error {
	if cmd.Type == "boom" {
		panic("handler bug")
	}
	return nil
}

func TestCheckerPanicStopsTheNodeWithoutApplying(t *testing.T) {
	c := newCluster(t, 1, func(_ int, cfg *Config) { cfg.Checker = panicChecker{} })
	n := c.nodes[c.leader(10*time.Second)]
	mustPropose(t, n, put("ok", "k", "v"))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p, err := n.Propose(ctx, []kv.Command{{ID: "b", Type: "boom", Effect: kv.Effect{Writes: []kv.Write{{Key: "boom", Value: []byte("x"), Unconditional: true}}}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Wait(ctx); !errors.Is(err, kv.ErrStopped) {
		t.Fatalf("wait: %v", err)
	}
	if err := n.Err(); err == nil || !strings.Contains(err.Error(), "checker panicked: handler bug") {
		t.Fatalf("node error: %v", err)
	}
	// The batch was rolled back: after a restart (still with the buggy
	// checker) the node stops again at the same entry instead of diverging.
	n = c.start(0)
	select {
	case <-n.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("node applied past the entry its checker cannot judge")
	}
	c.cfgs[0].Checker = nil
	n = c.start(0)
	c.leader(10 * time.Second)
	if _, ok, _ := n.Get(ctx, "k", false); !ok {
		t.Fatal("earlier entry lost")
	}
	if _, ok, _ := n.Get(ctx, "boom", true); !ok {
		t.Fatal("entry not applied once the checker is fixed")
	}
}

func TestDataDirBelongsToOneNode(t *testing.T) {
	c := newCluster(t, 1, nil)
	c.leader(10 * time.Second)
	c.stop(0)
	cfg := c.cfgs[0]
	cfg.NodeID = "impostor"
	cfg.Peers = nil
	if _, err := Start(cfg); err == nil || !strings.Contains(err.Error(), `belongs to node "n1"`) {
		t.Fatalf("start with another node's data dir: %v", err)
	}
	// The refused start left the directory usable by its owner.
	n := c.start(0)
	c.leader(10 * time.Second)
	mustPropose(t, n, put("a", "a", "1"))
}

func TestDroppedProposalIsDefinitelyNotAppended(t *testing.T) {
	c := newCluster(t, 3, func(_ int, cfg *Config) { cfg.MaxUncommittedBytes = 4096 })
	li := c.leader(10 * time.Second)
	n := c.nodes[li]
	mustPropose(t, n, put("w", "w", "1"))
	c.stop((li + 1) % 3)
	c.stop((li + 2) % 3)
	// Without quorum nothing commits; the uncommitted tail fills up and raft
	// refuses further proposals: ErrDropped, not appended.
	var dropped string
	for i := 0; i < 1000 && dropped == ""; i++ {
		id := fmt.Sprintf("fill-%d", i)
		_, err := n.Propose(context.Background(), []kv.Command{put(id, id, strings.Repeat("x", 256))})
		switch {
		case err == nil:
		case errors.Is(err, kv.ErrDropped):
			dropped = id
		default:
			t.Fatalf("proposal %d: %v (expected ErrDropped once the uncommitted limit is hit)", i, err)
		}
	}
	if dropped == "" {
		t.Fatal("uncommitted limit never refused a proposal")
	}
	c.start((li + 1) % 3)
	c.start((li + 2) % 3)
	c.leader(10 * time.Second)
	mustPropose(t, c.nodes[li], put("after", "after", "1"))
	c.converge(20 * time.Second)
	for _, nn := range c.nodes {
		if _, ok := nn.Outcome(dropped); ok {
			t.Fatalf("%s applied the dropped proposal %s", nn.ID(), dropped)
		}
	}
}

func TestJoinerCatchesUpFromSnapshotAndRestarts(t *testing.T) {
	c := newCluster(t, 1, func(_ int, cfg *Config) {
		cfg.SnapshotCount = 20
		cfg.SnapshotCatchUp = 5
	})
	l := c.nodes[c.leader(10*time.Second)]
	for i := range 60 {
		mustPropose(t, l, put(fmt.Sprintf("id%d", i), fmt.Sprintf("k/%02d", i), "v"))
	}
	if first, _ := l.storage.FirstIndex(); first <= 2 {
		t.Fatalf("log not compacted: first index %d", first)
	}
	lis := listen(t, loopback(6))
	jcfg := Config{NodeID: "j", DataDir: filepath.Join(t.TempDir(), "j"), RaftAddr: lis.Addr().String(), Listener: lis, Join: true, Logger: testLogger(t), SnapshotCount: 20, SnapshotCatchUp: 5}
	c.cfgs = append(c.cfgs, jcfg)
	c.nodes = append(c.nodes, nil)
	j := c.start(1)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := l.AddLearner(ctx, "j", j.Addr()); err != nil {
		t.Fatal(err)
	}
	if err := l.Promote(ctx, "j"); err != nil {
		t.Fatal(err)
	}
	c.converge(20 * time.Second)
	if j.snapIndex.Load() == 0 {
		t.Fatal("joiner did not start from a snapshot")
	}
	if ms := j.Members(); len(ms) != 2 || ms[0].ID != "j" || ms[1].ID != "n1" || ms[1].RaftAddr != l.Addr() {
		t.Fatalf("joiner's member table (from the snapshot): %+v", ms)
	}
	// The joiner restarts from its own disk and still serves reads.
	c.stop(1)
	j = c.start(1)
	c.leader(10 * time.Second)
	mustPropose(t, j, put("after", "after", "1"))
	c.converge(20 * time.Second)
	if recs, _ := j.List(ctx, "k/", true); len(recs) != 60 {
		t.Fatalf("joiner has %d keys", len(recs))
	}
}

func TestInvalidCommandsAreRejectedNotFatal(t *testing.T) {
	c := newCluster(t, 1, nil)
	n := c.nodes[c.leader(10*time.Second)]
	ctx := context.Background()
	bad := kv.Command{ID: "bad", Effect: kv.Effect{Writes: []kv.Write{{Key: "", Value: []byte("x"), Unconditional: true}}}}
	if _, err := n.Propose(ctx, []kv.Command{bad}); err == nil || !strings.Contains(err.Error(), "writes[0].key is empty") {
		t.Fatalf("propose with an empty key: %v", err)
	}
	// Another proposer (older version, bug) got it into the log anyway:
	// every replica records the same rejection and keeps going.
	data := encodeEnvelope(999, 1, []kv.Command{bad})
	if err := n.withRaft(func(rn *raft.RawNode) error { return rn.Propose(data) }); err != nil {
		t.Fatal(err)
	}
	proctest.WaitFor(t, 10*time.Second, "rejection recorded", func() bool {
		r, ok := n.Outcome("bad")
		return ok && r.Status == kv.StatusRejected && strings.Contains(r.Reason, "key is empty")
	})
	if r := mustPropose(t, n, put("ok", "k", "v")); r[0].Status != kv.StatusApplied {
		t.Fatalf("node unusable after an invalid entry: %+v", r)
	}
}

func TestEmptyWALFromAnInterruptedFirstStartBootstrapsAgain(t *testing.T) {
	dir := t.TempDir()
	// A first start that died right after creating its WAL.
	w, err := wal.Create(zap.NewNop(), filepath.Join(dir, "wal"), []byte("n1"))
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	lis := listen(t, loopback(4))
	n, err := Start(Config{NodeID: "n1", DataDir: dir, RaftAddr: lis.Addr().String(), Listener: lis, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Stop()
	proctest.WaitFor(t, 10*time.Second, "bootstrapped single node elects itself", n.IsLeader)
	mustPropose(t, n, put("a", "a", "1"))
}
