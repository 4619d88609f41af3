package membership_test

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/writ-dev/writ/kv"
	"github.com/writ-dev/writ/membership"
	"github.com/writ-dev/writ/raftstore"
)

// node is one in-process writ node reduced to what membership touches: a
// real raftstore node (etcd raft, WAL, peer transport on 127.0.2.x) and a
// real serf agent using it as its Voters.
type node struct {
	id  string
	rs  *raftstore.Node
	mem *membership.Agent
}

var _ membership.Voters = (*raftstore.Node)(nil)

func startNode(t *testing.T, id, ip string, bootstrap bool, grace time.Duration, seeds ...string) *node {
	return startNodeFP(t, id, ip, "fp-1", bootstrap, grace, seeds...)
}

func startNodeFP(t *testing.T, id, ip, fp string, bootstrap bool, grace time.Duration, seeds ...string) *node {
	t.Helper()
	quiet := slog.New(slog.DiscardHandler)
	rs, err := raftstore.Start(raftstore.Config{
		NodeID: id, DataDir: t.TempDir(), RaftAddr: ip + ":0", Join: !bootstrap, Logger: quiet,
	})
	if err != nil {
		t.Fatalf("raftstore %s: %v", id, err)
	}
	if bootstrap {
		waitUntil(t, 10*time.Second, id+" leader", rs.IsLeader)
	}
	mem, err := membership.Start(membership.Config{
		NodeID: id, BindAddr: ip, Seeds: seeds, RaftAddr: rs.Addr(), APIAddr: ip + ":9001",
		Fingerprint: fp, Version: "test", Profile: membership.ProfileLocal,
		FailedGrace: grace, ReconcileInterval: 200 * time.Millisecond, ChangeTimeout: 3 * time.Second,
		Logger: quiet,
	}, rs)
	if err != nil {
		rs.Stop()
		t.Fatalf("membership %s: %v", id, err)
	}
	n := &node{id: id, rs: rs, mem: mem}
	t.Cleanup(n.kill)
	return n
}

// kill stops the node without a graceful leave (like SIGKILL for the rest
// of the cluster).
func (n *node) kill() {
	_ = n.mem.Shutdown()
	n.rs.Stop()
}

func (n *node) leave() error {
	err := n.mem.Leave()
	n.rs.Stop()
	return err
}

func waitUntil(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// config renders a node's raft configuration as "id=voter,id=learner".
func config(rs *raftstore.Node) string {
	var parts []string
	for _, m := range rs.Members() {
		role := "learner"
		if m.Voter {
			role = "voter"
		}
		parts = append(parts, m.ID+"="+role)
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

func voters(ids ...string) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = id + "=voter"
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

func leaderOf(nodes []*node) *node {
	for _, n := range nodes {
		if n.rs.IsLeader() {
			return n
		}
	}
	return nil
}

// agree waits until every node has the same raft configuration, want.
func agree(t *testing.T, timeout time.Duration, nodes []*node, want string) {
	t.Helper()
	var last string
	deadline := time.Now().Add(timeout)
	for {
		last = ""
		ok := true
		for _, n := range nodes {
			got := config(n.rs)
			last += fmt.Sprintf("\n%s: %s", n.id, got)
			if got != want {
				ok = false
			}
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("configurations did not converge to %s within %s:%s", want, timeout, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Real raftstore nodes form a 5-voter cluster from gossip alone, replicate,
// lose a node gracefully and two by kill -9 semantics, and never shrink
// below 2 voters.
func TestCluster_RealRaftstore_FormsAndHealsFromGossip(t *testing.T) {
	// The grace period must outlast a false suspicion on a loaded machine: a
	// falsely removed node stops its raft node and could not come back.
	const grace = 6 * time.Second
	n1 := startNode(t, "r1", "127.0.2.32", true, grace)
	n2 := startNode(t, "r2", "127.0.2.33", false, grace, n1.mem.Addr())
	n3 := startNode(t, "r3", "127.0.2.34", false, grace, n1.mem.Addr())
	all := []*node{n1, n2, n3}
	agree(t, 30*time.Second, all, voters("r1", "r2", "r3"))
	n4 := startNode(t, "r4", "127.0.2.35", false, grace, n2.mem.Addr())
	n5 := startNode(t, "r5", "127.0.2.36", false, grace, n3.mem.Addr())
	all = append(all, n4, n5)
	agree(t, 45*time.Second, all, voters("r1", "r2", "r3", "r4", "r5"))

	// The cluster works: a write through the leader applies everywhere.
	ld := leaderOf(all)
	if ld == nil {
		t.Fatal("no leader")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p, err := ld.rs.Propose(ctx, []kv.Command{{ID: "w1", Type: "test.write", Effect: kv.Effect{Writes: []kv.Write{{Key: "k", Value: []byte("v")}}}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 10*time.Second, "write applied on every node", func() bool {
		for _, n := range all {
			if rec, ok, err := n.rs.Get(ctx, "k", false); err != nil || !ok || string(rec.Value) != "v" {
				return false
			}
		}
		return true
	})

	// A node built for another schema gossips but is never admitted.
	odd := startNodeFP(t, "r6", "127.0.2.37", "fp-2", false, grace, n1.mem.Addr())
	waitUntil(t, 45*time.Second, "r6 refused by the leader", func() bool {
		ld := leaderOf(all)
		if ld == nil {
			return false
		}
		for _, r := range ld.mem.Refused() {
			if r.ID == "r6" && strings.Contains(r.Reason, "incompatible schema") {
				return true
			}
		}
		return false
	})
	time.Sleep(time.Second)
	agree(t, time.Second, all, voters("r1", "r2", "r3", "r4", "r5"))
	if got := config(odd.rs); got != "" {
		t.Fatalf("refused node has configuration %q", got)
	}
	odd.kill()

	// Graceful leave: removed without waiting for the grace period.
	left := time.Now()
	if err := n5.leave(); err != nil {
		t.Fatal(err)
	}
	all = all[:4]
	agree(t, 30*time.Second, all, voters("r1", "r2", "r3", "r4"))
	t.Logf("graceful leave removed after %s", time.Since(left).Round(time.Millisecond))

	// Kill: removed only after the grace period.
	killed := time.Now()
	n4.kill()
	all = all[:3]
	agree(t, 20*time.Second, all, voters("r1", "r2", "r3"))
	took := time.Since(killed)
	if took < grace {
		t.Fatalf("killed node removed after %s, before the %s grace", took, grace)
	}
	t.Logf("killed node removed after %s (grace %s)", took.Round(time.Millisecond), grace)

	// A 3-voter cluster losing one shrinks to 2 voters...
	var victim *node
	for _, n := range all {
		if !n.rs.IsLeader() {
			victim = n
			break
		}
	}
	victim.kill()
	var rest []*node
	for _, n := range all {
		if n != victim {
			rest = append(rest, n)
		}
	}
	agree(t, 20*time.Second, rest, voters(rest[0].id, rest[1].id))

	// ...and losing another does not shrink to 1 (kill the follower, so the
	// survivor is the one that would have to act).
	waitUntil(t, 10*time.Second, "a leader among the two", func() bool { return leaderOf(rest) != nil })
	if rest[1].rs.IsLeader() {
		rest[0], rest[1] = rest[1], rest[0]
	}
	rest[1].kill()
	time.Sleep(grace + 3*time.Second)
	if got, want := config(rest[0].rs), voters(rest[0].id, rest[1].id); got != want {
		t.Fatalf("survivor's configuration %s, want %s kept", got, want)
	}
	view := rest[0].mem.View()
	for _, m := range view.Members {
		if m.ID == rest[1].id && m.Gossip != membership.GossipFailed {
			t.Errorf("%s shows as %q in gossip, want failed", m.ID, m.Gossip)
		}
	}
}
