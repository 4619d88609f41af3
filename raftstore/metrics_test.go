package raftstore

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/writ-dev/writ/internal/proctest"
	"github.com/writ-dev/writ/kv"
)

// recordingMetrics_Fake counts what a node reports.
type recordingMetrics_Fake struct {
	mu                                         sync.Mutex
	leaderChanges, dropped, snapshots, commits int
	applies                                    int
	sentMsgs, sentBytes, recvMsgs, recvBytes   map[string]int
}

func newRecording() *recordingMetrics_Fake {
	return &recordingMetrics_Fake{sentMsgs: map[string]int{}, sentBytes: map[string]int{}, recvMsgs: map[string]int{}, recvBytes: map[string]int{}}
}

func (m *recordingMetrics_Fake) LeaderChanged()   { m.mu.Lock(); m.leaderChanges++; m.mu.Unlock() }
func (m *recordingMetrics_Fake) ProposalDropped() { m.mu.Lock(); m.dropped++; m.mu.Unlock() }
func (m *recordingMetrics_Fake) SnapshotTaken(time.Duration) {
	m.mu.Lock()
	m.snapshots++
	m.mu.Unlock()
}
func (m *recordingMetrics_Fake) StateCommitted(time.Duration) {
	m.mu.Lock()
	m.commits++
	m.mu.Unlock()
}
func (m *recordingMetrics_Fake) ObserveStage(s string, _ time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if s == "apply" {
		m.applies++
	}
}
func (m *recordingMetrics_Fake) PeerSent(p string, msgs, bytes int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sentMsgs[p] += msgs
	m.sentBytes[p] += bytes
}
func (m *recordingMetrics_Fake) PeerReceived(p string, msgs, bytes int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.recvMsgs[p] += msgs
	m.recvBytes[p] += bytes
}

// TestMetricsHooks: a real 3-node cluster (real WAL, bbolt, transport)
// reports leader changes, state commits, applied batches, snapshots and
// per-peer traffic; after quorum loss a refused proposal is counted.
func TestMetricsHooks(t *testing.T) {
	const n = 3
	c := &cluster{t: t}
	root := t.TempDir()
	rec := make([]*recordingMetrics_Fake, n)
	var peers []Peer
	for i := range n {
		lis := listen(t, fmt.Sprintf("127.0.17.%d", 31+i))
		peers = append(peers, Peer{ID: fmt.Sprintf("m%d", i+1), Addr: lis.Addr().String()})
		c.cfgs = append(c.cfgs, Config{NodeID: peers[i].ID, DataDir: filepath.Join(root, peers[i].ID), RaftAddr: peers[i].Addr,
			Listener: lis, Logger: testLogger(t), SnapshotCount: 50, SnapshotCatchUp: 10})
		rec[i] = newRecording()
		c.cfgs[i].Metrics = rec[i]
	}
	for i := range c.cfgs {
		c.cfgs[i].Peers = peers
	}
	c.nodes = make([]*Node, n)
	for i := range n {
		c.start(i)
	}
	t.Cleanup(c.stopAll)
	li := c.leader(10 * time.Second)
	for i := 0; i < 200; i++ {
		mustPropose(t, c.nodes[li], put(fmt.Sprintf("c%d", i), fmt.Sprintf("k%d", i%7), "v"))
	}
	c.converge(10 * time.Second)
	for i, m := range rec {
		m.mu.Lock()
		if m.leaderChanges < 1 || m.commits == 0 || m.applies == 0 || m.snapshots == 0 {
			t.Errorf("node %d: leader changes %d, state commits %d, applied batches %d, snapshots %d: want all > 0",
				i, m.leaderChanges, m.commits, m.applies, m.snapshots)
		}
		for j := range n {
			if j == i || (i != li && j != li) {
				continue // followers talk to the leader only
			}
			p := peerLabel(RaftID(peers[j].ID))
			if m.sentMsgs[p] == 0 || m.sentBytes[p] == 0 || m.recvMsgs[p] == 0 || m.recvBytes[p] == 0 {
				t.Errorf("node %d ↔ peer %s: sent %d msgs/%d bytes, received %d/%d: want all > 0", i, p, m.sentMsgs[p], m.sentBytes[p], m.recvMsgs[p], m.recvBytes[p])
			}
		}
		if m.dropped != 0 {
			t.Errorf("node %d counted %d dropped proposals with quorum", i, m.dropped)
		}
		m.mu.Unlock()
	}
	// quorum loss: once the survivor knows no leader, a proposal is
	// refused definitely, and counted
	c.stop((li + 1) % n)
	c.stop((li + 2) % n)
	s := c.nodes[li]
	proctest.WaitFor(t, 10*time.Second, "leader unknown", func() bool { return s.Status().LeaderID == "" })
	if _, err := s.Propose(context.Background(), []kv.Command{put("x", "x", "1")}); !errors.Is(err, kv.ErrNoLeader) {
		t.Fatalf("propose without leader: %v", err)
	}
	rec[li].mu.Lock()
	defer rec[li].mu.Unlock()
	if rec[li].dropped != 1 {
		t.Fatalf("dropped proposals %d, want 1", rec[li].dropped)
	}
}
