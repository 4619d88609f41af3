package raftstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/server/v3/storage/wal/walpb"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// The Ready loop and the WAL appender: raft's output persisted (one fsync
// per round), sent, and handed to the applier.

// run is the Ready loop; see the package doc for the numbered duties.
func (n *Node) run() {
	defer n.wg.Done()
	ticker := time.NewTicker(n.cfg.TickInterval)
	defer ticker.Stop()
	for {
		// Tick even while Readys keep coming.
		select {
		case <-ticker.C:
			n.rnMu.Lock()
			n.rn.Tick()
			n.rnMu.Unlock()
		default:
		}
		n.rnMu.Lock()
		var rd raft.Ready
		has := n.rn.HasReady()
		if has {
			rd = n.rn.Ready()
		}
		n.rnMu.Unlock()
		if has {
			if err := n.handleReady(rd); err != nil {
				if !errors.Is(err, errStopping) {
					n.failAsync(err)
				}
				return
			}
			continue
		}
		select {
		case <-ticker.C:
			n.rnMu.Lock()
			n.rn.Tick()
			n.rnMu.Unlock()
		case <-n.wakec:
		case <-n.stopc:
			return
		}
	}
}

// withRaft calls f with the raft state machine, then wakes the Ready loop.
// It returns raft.ErrStopped once the node is stopping.
func (n *Node) withRaft(f func(rn *raft.RawNode) error) error {
	n.rnMu.Lock()
	if n.rnStopped {
		n.rnMu.Unlock()
		return raft.ErrStopped
	}
	err := f(n.rn)
	n.rnMu.Unlock()
	select {
	case n.wakec <- struct{}{}:
	default:
	}
	return err
}

var errStopping = errors.New("raftstore: stopping")

func (n *Node) handleReady(rd raft.Ready) error {
	if rd.SoftState != nil {
		n.mleader(n.leader.Swap(rd.SoftState.Lead), rd.SoftState.Lead)
		n.isLeader.Store(rd.SoftState.RaftState == raft.StateLeader)
	}
	if rd.HardState != nil {
		n.term.Store(rd.HardState.GetTerm())
		n.commit.Store(rd.HardState.GetCommit())
	}
	// 1. Route the messages: log appends to the appender, committed
	// entries to the applier, the rest to the network at once. What must
	// wait for this node's disk (append and vote responses) travels inside
	// the append message and is sent by the appender after the fsync.
	var peers []*raftpb.Message
	for _, m := range rd.Messages {
		switch m.GetTo() {
		case raft.LocalAppendThread:
			select {
			case n.appendc <- m:
			case <-n.stopc:
				return errStopping
			}
		case raft.LocalApplyThread:
			if err := n.handToApplier(applyTask{entries: m.GetEntries(), resps: m.GetResponses()}); err != nil {
				return err
			}
		default:
			peers = append(peers, m)
		}
	}
	n.tr.send(coalesce(peers, n.cfg.MaxBatchBytes))
	// 2. Answer linearizable reads.
	if len(rd.ReadStates) > 0 {
		n.mu.Lock()
		for _, rs := range rd.ReadStates {
			if len(rs.RequestCtx) == 8 {
				if ch, ok := n.reads[binary.BigEndian.Uint64(rs.RequestCtx)]; ok {
					select {
					case ch <- rs.Index:
					default:
					}
				}
			}
		}
		n.mu.Unlock()
	}
	return nil
}

// appender persists log appends in order: each round takes every append
// message queued by then and writes them with one WAL fsync, makes them
// visible to raft's log storage, hands received snapshots to the applier
// and only then delivers the responses the messages carry (to this node's
// raft and to peers). An error stops the node with nothing acknowledged.
func (n *Node) appender() {
	defer n.wg.Done()
	var batch []*raftpb.Message
	for {
		batch = batch[:0]
		select {
		case m := <-n.appendc:
			batch = append(batch, m)
		case <-n.stopc:
			return
		}
	more:
		for len(batch) < maxAppendBatch {
			select {
			case m := <-n.appendc:
				batch = append(batch, m)
			default:
				break more
			}
		}
		if err := n.persist(batch); err != nil {
			if !errors.Is(err, errStopping) {
				n.failAsync(err)
			}
			return
		}
	}
}

// maxAppendBatch bounds how many append messages share one WAL fsync.
const maxAppendBatch = 256

func (n *Node) persist(batch []*raftpb.Message) error {
	// 1. WAL: entries and hard state, a received snapshot's file and
	// record in its place in the order, one fsync for the batch.
	var ents []*raftpb.Entry
	var hs *raftpb.HardState
	save := func() error {
		if len(ents) == 0 && hs == nil {
			return nil
		}
		var err error
		if h := n.cfg.hooks; h != nil && h.beforeWALSave != nil {
			err = h.beforeWALSave()
		}
		if err == nil {
			err = n.wal.Save(hs, ents)
		}
		if err != nil {
			return fmt.Errorf("raftstore: WAL write/fsync failed; stopping without acknowledging: %w", err)
		}
		if len(ents) > 0 {
			n.fsyncs.Add(1)
			n.entries.Add(uint64(len(ents)))
		}
		ents, hs = ents[:0], nil
		return nil
	}
	for _, m := range batch {
		if s := m.GetSnapshot(); !raft.IsEmptySnap(s) {
			if err := save(); err != nil {
				return err
			}
			if err := n.saveSnapshot(s); err != nil {
				return err
			}
		}
		ents = append(ents, m.GetEntries()...)
		if m.Term != nil {
			hs = &raftpb.HardState{Term: m.Term, Vote: m.Vote, Commit: m.Commit}
		}
	}
	if err := save(); err != nil {
		return err
	}
	// 2. Raft's log storage, in order; a received snapshot also goes to
	// the applier, behind the committed entries handed to it before.
	for _, m := range batch {
		if s := m.GetSnapshot(); !raft.IsEmptySnap(s) {
			if err := n.storage.applySnapshot(s); err != nil {
				return fmt.Errorf("raftstore: apply snapshot to log storage: %w", err)
			}
			if err := n.handToApplier(applyTask{snap: s}); err != nil {
				return err
			}
		}
		if err := n.storage.Append(m.GetEntries()); err != nil {
			return fmt.Errorf("raftstore: append to log storage: %w", err)
		}
	}
	// 3. The responses, now that what they promise is durable.
	var local, remote []*raftpb.Message
	for _, m := range batch {
		for _, r := range m.GetResponses() {
			if r.GetTo() == n.id {
				local = append(local, r)
			} else {
				remote = append(remote, r)
			}
		}
	}
	n.tr.send(coalesce(remote, n.cfg.MaxBatchBytes))
	return n.stepLocal(local)
}

// stepLocal steps messages from this node's own storage goroutines.
func (n *Node) stepLocal(msgs []*raftpb.Message) error {
	if len(msgs) == 0 {
		return nil
	}
	err := n.withRaft(func(rn *raft.RawNode) error {
		for _, m := range msgs {
			// A response from a member this node no longer knows (it was
			// just removed) is refused; nothing else can fail here.
			_ = rn.Step(m)
		}
		return nil
	})
	if errors.Is(err, raft.ErrStopped) {
		return errStopping
	}
	return err
}

func (n *Node) handToApplier(t applyTask) error {
	select {
	case n.applyc <- t:
		return nil
	case <-n.stopc:
		return errStopping
	}
}

func (n *Node) saveSnapshot(s *raftpb.Snapshot) error {
	md := s.GetMetadata()
	if err := n.snapper.SaveSnap(s); err != nil {
		return fmt.Errorf("raftstore: save snapshot %d: %w", md.GetIndex(), err)
	}
	ws := &walpb.Snapshot{Index: new(md.GetIndex()), Term: new(md.GetTerm()), ConfState: md.GetConfState()}
	if ws.ConfState == nil {
		ws.ConfState = &raftpb.ConfState{}
	}
	if err := n.wal.SaveSnapshot(ws); err != nil {
		return fmt.Errorf("raftstore: WAL snapshot record %d: %w", md.GetIndex(), err)
	}
	return nil
}
