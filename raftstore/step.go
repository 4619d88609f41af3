package raftstore

import (
	"context"
	"errors"
	"fmt"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// Transport callbacks: messages from peers checked and stepped into raft,
// snapshots filled, unreachable peers and snapshot status reported.

// check validates a message received from a peer (checkIncoming).
func (n *Node) check(m *raftpb.Message) error {
	last, err := n.storage.LastIndex()
	if err != nil {
		return fmt.Errorf("%w: %w", errMalformed, err)
	}
	return n.checkIncoming(m, last)
}

// step steps a message received from a peer. Messages raft refuses (a
// local message type, a response from a peer it does not know) are
// dropped; only a stopping node returns an error.
// The transport checks every message first (check); one that still makes
// raft panic is refused with an error wrapping errMalformed: the transport
// drops the stream and logs where it came from. raft's panics on a
// received message are assertions checked before it changes any state.
func (n *Node) step(_ context.Context, m *raftpb.Message) error {
	err := n.withRaft(func(rn *raft.RawNode) (err error) {
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("%w: raft refused %s from %x: %v", errMalformed, m.GetType(), m.GetFrom(), p)
			}
		}()
		return rn.Step(m)
	})
	if errors.Is(err, raft.ErrStopped) || errors.Is(err, errMalformed) {
		return err
	}
	return nil
}

// fillSnapshot gives an outgoing MsgSnap its data: the applied state as it
// stands now, named by its own index, term and configuration. Raft picked
// the newest local snapshot, which carries no data; the current state is
// at or past it (local snapshots are taken of synced state), so the
// follower ends up further ahead, and raft accepts that (etcd's server
// sends its backend the same way). The message gets a new Snapshot: the
// one raft handed over belongs to the log storage.
func (n *Node) fillSnapshot(m *raftpb.Message) error {
	s, err := n.st.snapshot()
	if err != nil {
		return fmt.Errorf("raftstore: build snapshot for node %x: %w", m.GetTo(), err)
	}
	if s.GetMetadata().GetIndex() < m.GetSnapshot().GetMetadata().GetIndex() {
		return fmt.Errorf("raftstore: build snapshot for node %x: state at %d is behind snapshot %d", m.GetTo(), s.GetMetadata().GetIndex(), m.GetSnapshot().GetMetadata().GetIndex())
	}
	m.Snapshot = s
	return nil
}

func (n *Node) reportUnreachable(id uint64) {
	_ = n.withRaft(func(rn *raft.RawNode) error { rn.ReportUnreachable(id); return nil })
}

func (n *Node) reportSnapshot(id uint64, s raft.SnapshotStatus) {
	_ = n.withRaft(func(rn *raft.RawNode) error { rn.ReportSnapshot(id, s); return nil })
}

// applyConfChange tells raft that a configuration change was applied.
func (n *Node) applyConfChange(cc raftpb.ConfChangeI) *raftpb.ConfState {
	var cs *raftpb.ConfState
	_ = n.withRaft(func(rn *raft.RawNode) error { cs = rn.ApplyConfChange(cc); return nil })
	return cs
}
