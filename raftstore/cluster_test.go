package raftstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/writ-dev/writ/kv"
)

// Loopback addresses: in-process clusters use 127.0.1.1–127.0.1.9, the
// crash-recovery processes 127.0.1.21–127.0.1.23 (ports are kernel-chosen).
// WRITTEST_LOOPBACK (e.g. 127.0.5) moves all of them to another /24.

// loopback returns the test address host on the clusters' /24.
func loopback(host int) string {
	net := os.Getenv("WRITTEST_LOOPBACK")
	if net == "" {
		net = "127.0.1"
	}
	return fmt.Sprintf("%s.%d", net, host)
}

func testLogger(testing.TB) *slog.Logger {
	if os.Getenv("WRITTEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

type cluster struct {
	t     testing.TB
	cfgs  []Config
	nodes []*Node
}

func listen(t testing.TB, ip string) net.Listener {
	t.Helper()
	lis, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Fatalf("listen %s: %v", ip, err)
	}
	return lis
}

// newCluster starts n nodes as one static initial configuration.
func newCluster(t testing.TB, n int, mut func(i int, c *Config)) *cluster {
	t.Helper()
	return newClusterOn(t, "", n, mut)
}

// newClusterOn is newCluster on the addresses subnet.1 to subnet.n
// (subnet "" is loopback's).
func newClusterOn(t testing.TB, subnet string, n int, mut func(i int, c *Config)) *cluster {
	t.Helper()
	c := &cluster{t: t}
	root := t.TempDir()
	var peers []Peer
	lis := make([]net.Listener, n)
	for i := range n {
		addr := loopback(i + 1)
		if subnet != "" {
			addr = fmt.Sprintf("%s.%d", subnet, i+1)
		}
		lis[i] = listen(t, addr)
		peers = append(peers, Peer{ID: fmt.Sprintf("n%d", i+1), Addr: lis[i].Addr().String()})
	}
	for i := range n {
		cfg := Config{
			NodeID:   peers[i].ID,
			DataDir:  filepath.Join(root, peers[i].ID),
			RaftAddr: peers[i].Addr,
			Listener: lis[i],
			Peers:    peers,
			Logger:   testLogger(t),
		}
		if mut != nil {
			mut(i, &cfg)
		}
		c.cfgs = append(c.cfgs, cfg)
	}
	c.nodes = make([]*Node, n)
	for i := range n {
		c.start(i)
	}
	t.Cleanup(c.stopAll)
	return c
}

func (c *cluster) start(i int) *Node {
	c.t.Helper()
	cfg := c.cfgs[i]
	if c.nodes[i] != nil && cfg.Listener != nil {
		// A restart listens again on the same address.
		cfg.Listener = nil
	}
	var n *Node
	var err error
	for try := 0; try < 50; try++ {
		n, err = Start(cfg)
		if err == nil || !strings.Contains(err.Error(), "address already in use") {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		c.t.Fatalf("start %s: %v", cfg.NodeID, err)
	}
	c.cfgs[i].Listener = nil
	c.cfgs[i].RaftAddr = n.Addr()
	c.nodes[i] = n
	return n
}

func (c *cluster) stop(i int) {
	if c.nodes[i] != nil {
		c.nodes[i].Stop()
	}
}

func (c *cluster) stopAll() {
	for i := range c.nodes {
		c.stop(i)
	}
}

func (c *cluster) alive(i int) bool {
	n := c.nodes[i]
	if n == nil {
		return false
	}
	select {
	case <-n.Done():
		return false
	default:
		return true
	}
}

// leader waits until exactly one live node leads and all live nodes agree.
func (c *cluster) leader(timeout time.Duration) int {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		lead := -1
		agree := true
		for i, n := range c.nodes {
			if !c.alive(i) {
				continue
			}
			if n.IsLeader() {
				lead = i
			}
		}
		if lead >= 0 {
			for i, n := range c.nodes {
				if c.alive(i) && n.Status().LeaderID != c.nodes[lead].ID() {
					agree = false
				}
			}
			if agree {
				return lead
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.t.Fatalf("no leader within %v", timeout)
	return -1
}

func put(id, key, val string) kv.Command {
	return kv.Command{ID: id, Type: "test.put", Origin: "test", Effect: kv.Effect{Writes: []kv.Write{{Key: key, Value: []byte(val), Unconditional: true}}}}
}

func mustPropose(t testing.TB, n *Node, cmds ...kv.Command) []kv.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var lastErr error
	for ctx.Err() == nil {
		p, err := n.Propose(ctx, cmds)
		if err != nil {
			if errors.Is(err, kv.ErrNoLeader) || errors.Is(err, kv.ErrDropped) {
				lastErr = err
				time.Sleep(50 * time.Millisecond)
				continue
			}
			t.Fatalf("propose on %s: %v", n.ID(), err)
		}
		res, err := p.Wait(ctx)
		if err != nil {
			t.Fatalf("wait on %s: %v", n.ID(), err)
		}
		if len(res) != len(cmds) {
			t.Fatalf("%d results for %d commands", len(res), len(cmds))
		}
		return res
	}
	t.Fatalf("propose on %s: no success before timeout: %v", n.ID(), lastErr)
	return nil
}

// converge waits until every live node applied the same index and returns
// that node's state hash, failing if hashes differ.
func (c *cluster) converge(timeout time.Duration) [32]byte {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	var last string
	for time.Now().Before(deadline) {
		var idx []uint64
		var sums [][32]byte
		for i, n := range c.nodes {
			if !c.alive(i) {
				continue
			}
			a, s, err := n.StateHash()
			if err != nil {
				c.t.Fatalf("hash %s: %v", n.ID(), err)
			}
			if n.applied.Load() < a {
				// The state is committed but the node has not finished
				// with it yet (a snapshot restore records its index, then
				// its bookkeeping, then the applied index): not settled.
				a = 0
			}
			idx = append(idx, a)
			sums = append(sums, s)
		}
		same := true
		for i := range idx {
			if idx[i] != idx[0] || idx[i] < c.maxCommit() {
				same = false
			}
		}
		if same {
			for i := range sums {
				if sums[i] != sums[0] {
					c.t.Fatalf("state hashes differ at applied index %d: %x vs %x", idx[0], sums[0], sums[i])
				}
			}
			return sums[0]
		}
		last = fmt.Sprint(idx)
		time.Sleep(20 * time.Millisecond)
	}
	c.t.Fatalf("nodes did not converge within %v (applied %s, commit %d)", timeout, last, c.maxCommit())
	return [32]byte{}
}

func (c *cluster) maxCommit() uint64 {
	var m uint64
	for i, n := range c.nodes {
		if c.alive(i) {
			m = max(m, n.Status().Commit)
		}
	}
	return m
}
