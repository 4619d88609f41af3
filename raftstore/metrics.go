package raftstore

import (
	"strconv"
	"time"
)

// Metrics receives the node's measurements (Config.Metrics). Calls come
// from the raft, appender, applier and transport goroutines: an
// implementation must be cheap and safe for concurrent use. Term, commit
// and applied indexes are read with Status, not pushed.
type Metrics interface {
	// LeaderChanged counts a change to a new known leader.
	LeaderChanged()
	// ProposalDropped counts a proposal consensus refused (not appended).
	ProposalDropped()
	// SnapshotTaken records one local snapshot and how long it took.
	SnapshotTaken(d time.Duration)
	// StateCommitted records one bbolt state transaction commit.
	StateCommitted(d time.Duration)
	// ObserveStage records the "apply" stage: one applied batch of entries.
	ObserveStage(stage string, d time.Duration)
	// PeerSent and PeerReceived record one transport frame (peer is the
	// raft ID in hex).
	PeerSent(peer string, msgs, bytes int)
	PeerReceived(peer string, msgs, bytes int)
}

func peerLabel(id uint64) string { return strconv.FormatUint(id, 16) }

func (n *Node) mleader(prev, lead uint64) {
	if m := n.cfg.Metrics; m != nil && lead != prev && lead != 0 {
		m.LeaderChanged()
	}
}

func (n *Node) mdropped(err error) error {
	if m := n.cfg.Metrics; m != nil {
		m.ProposalDropped()
	}
	return err
}

func (n *Node) msnapshot(t0 time.Time) {
	if m := n.cfg.Metrics; m != nil {
		m.SnapshotTaken(time.Since(t0))
	}
}

func (n *Node) mapply(t0 time.Time) {
	if m := n.cfg.Metrics; m != nil {
		m.ObserveStage("apply", time.Since(t0))
	}
}

// stateCommitHook is given to the state database when the node measures.
func (n *Node) stateCommitHook() func(time.Duration) {
	if m := n.cfg.Metrics; m != nil {
		return m.StateCommitted
	}
	return nil
}

func (t *transport) msent(to uint64, msgs, bytes int) {
	if t.metrics != nil {
		t.metrics.PeerSent(peerLabel(to), msgs, bytes)
	}
}

func (t *transport) mreceived(from uint64, msgs, bytes int) {
	if t.metrics != nil && msgs > 0 {
		t.metrics.PeerReceived(peerLabel(from), msgs, bytes)
	}
}
