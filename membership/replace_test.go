package membership_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/writ-dev/writ/kv"
	"github.com/writ-dev/writ/membership"
	"github.com/writ-dev/writ/raftstore"
)

// replaceIP is a host of the membership replacement tests' /24
// (127.0.98.x; WRITTEST_REPLACE_NET moves it).
func replaceIP(host int) string {
	net := os.Getenv("WRITTEST_REPLACE_NET")
	if net == "" {
		net = "127.0.98"
	}
	return fmt.Sprintf("%s.%d", net, host)
}

// nodeAt starts a node on fixed gossip and raft addresses (port 0: kernel
// chosen) with its data in dir, as a rebuilt member comes back on its old
// addresses.
func nodeAt(t *testing.T, id, ip string, gossipPort int, raftAddr, dir string, bootstrap bool, grace time.Duration, seeds ...string) *node {
	t.Helper()
	quiet := slog.New(slog.DiscardHandler)
	if os.Getenv("WRITTEST_LOG") != "" {
		quiet = slog.New(slog.NewTextHandler(os.Stderr, nil)).With("test_node", id)
	}
	var rs *raftstore.Node
	var err error
	for try := 0; try < 50; try++ { // the predecessor's sockets may linger
		rs, err = raftstore.Start(raftstore.Config{NodeID: id, DataDir: dir, RaftAddr: raftAddr, Join: !bootstrap, SnapshotCount: 1 << 20, Logger: quiet})
		if err == nil || !strings.Contains(err.Error(), "address already in use") {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("raftstore %s: %v", id, err)
	}
	if bootstrap {
		waitUntil(t, 20*time.Second, id+" leader", rs.IsLeader)
	}
	mem, err := membership.Start(membership.Config{
		NodeID: id, BindAddr: ip, BindPort: gossipPort, Seeds: seeds, RaftAddr: rs.Addr(), APIAddr: ip + ":9001",
		Fingerprint: "fp-1", Version: "test", Profile: membership.ProfileLocal, JoinAttempts: 10, JoinRetryInterval: 300 * time.Millisecond,
		FailedGrace: grace, ReconcileInterval: 200 * time.Millisecond, ChangeTimeout: 5 * time.Second, Logger: quiet,
	}, rs)
	if err != nil {
		rs.Stop()
		t.Fatalf("membership %s: %v", id, err)
	}
	n := &node{id: id, rs: rs, mem: mem}
	t.Cleanup(n.kill)
	return n
}

func gossipPort(t *testing.T, n *node) int {
	_, p, err := net.SplitHostPort(n.mem.Addr())
	if err != nil {
		t.Fatal(err)
	}
	port, _ := strconv.Atoi(p)
	return port
}

func incarnationOf(n *node, id string) uint64 {
	for _, m := range n.rs.Members() {
		if m.ID == id {
			return m.Incarnation
		}
	}
	return 0
}

// TestCluster_RealRaftstore_ReplaceMemberUnderItsOwnName rebuilds members
// of a real 3-node cluster (raftstore over WAL and bbolt, serf gossip, the
// leader's reconciler) with new data directories under their own names and
// addresses, snapshots too rare for one to be sent, so the new member
// catches up from log entries that hold its predecessor's removal:
//
//  1. r3 is killed and rebuilt at once, before the failed grace ends: the
//     leader removes the earlier incarnation (the configuration names it,
//     gossip announces the new one) and adds the new one, which is
//     promoted;
//  2. r1, the bootstrap node, leaves gracefully and is rebuilt joining
//     through r2, as docs/operator.md says: it is added back and promoted.
//
// No node stops, and every node ends with the same configuration naming
// the new incarnations.
func TestCluster_RealRaftstore_ReplaceMemberUnderItsOwnName(t *testing.T) {
	const grace = time.Minute // longer than the test: no removal by failure
	root := t.TempDir()
	dir := func(id string, gen int) string { return fmt.Sprintf("%s/%s-%d", root, id, gen) }
	n1 := nodeAt(t, "r1", replaceIP(31), 0, replaceIP(31)+":0", dir("r1", 0), true, grace)
	n2 := nodeAt(t, "r2", replaceIP(32), 0, replaceIP(32)+":0", dir("r2", 0), false, grace, n1.mem.Addr())
	n3 := nodeAt(t, "r3", replaceIP(33), 0, replaceIP(33)+":0", dir("r3", 0), false, grace, n1.mem.Addr())
	all := []*node{n1, n2, n3}
	agree(t, 60*time.Second, all, voters("r1", "r2", "r3"))
	write := func(tag string, n int) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for i := 0; i < n; i++ {
			var err error
			for ctx.Err() == nil {
				ld := leaderOf(all)
				if ld == nil {
					time.Sleep(50 * time.Millisecond)
					continue
				}
				var p kv.Proposal
				if p, err = ld.rs.Propose(ctx, []kv.Command{{ID: fmt.Sprintf("%s-%d", tag, i), Type: "test.write",
					Effect: kv.Effect{Writes: []kv.Write{{Key: fmt.Sprintf("k/%s/%d", tag, i), Value: []byte("v"), Unconditional: true}}}}}); err == nil {
					if _, err = p.Wait(ctx); err == nil {
						break
					}
				}
				time.Sleep(50 * time.Millisecond)
			}
			if ctx.Err() != nil {
				t.Fatalf("write %s-%d: %v", tag, i, err)
			}
		}
	}
	write("first", 20)

	// 1. Killed and rebuilt before the grace: the earlier incarnation is removed.
	old3 := n3.rs.Incarnation()
	gp3, ra3 := gossipPort(t, n3), n3.rs.Addr()
	n3.kill()
	write("without-r3", 20)
	n3 = nodeAt(t, "r3", replaceIP(33), gp3, ra3, dir("r3", 1), false, grace, n1.mem.Addr())
	if n3.rs.Incarnation() == old3 {
		t.Fatal("rebuilt r3 kept its incarnation")
	}
	all[2] = n3
	waitUntil(t, 90*time.Second, "r3's new incarnation a voter everywhere", func() bool {
		for _, n := range all {
			if config(n.rs) != voters("r1", "r2", "r3") || incarnationOf(n, "r3") != n3.rs.Incarnation() {
				return false
			}
		}
		return true
	})
	write("with-new-r3", 20)

	// 2. The bootstrap node leaves and is rebuilt joining through r2.
	gp1, ra1 := gossipPort(t, n1), n1.rs.Addr()
	if err := n1.leave(); err != nil {
		t.Fatal(err)
	}
	agree(t, 60*time.Second, all[1:], voters("r2", "r3"))
	write("without-r1", 20)
	n1 = nodeAt(t, "r1", replaceIP(31), gp1, ra1, dir("r1", 1), false, grace, n2.mem.Addr())
	all[0] = n1
	waitUntil(t, 90*time.Second, "r1's new incarnation a voter everywhere", func() bool {
		for _, n := range all {
			if config(n.rs) != voters("r1", "r2", "r3") || incarnationOf(n, "r1") != n1.rs.Incarnation() {
				return false
			}
		}
		return true
	})
	write("with-new-r1", 20)
	waitUntil(t, 30*time.Second, "every node applied every write", func() bool {
		for _, n := range all {
			if rec, ok, err := n.rs.Get(context.Background(), "k/with-new-r1/19", false); err != nil || !ok || string(rec.Value) != "v" {
				return false
			}
		}
		return true
	})
	for _, n := range all {
		select {
		case <-n.rs.Done():
			t.Fatalf("%s stopped: %v", n.id, n.rs.Err())
		default:
		}
	}
}
