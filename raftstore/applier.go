package raftstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	bolt "go.etcd.io/bbolt"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/writ-dev/writ/kv"
)

// The applier goroutine: committed entries applied to the state in order,
// membership changes, snapshots restored and taken, and waits on the
// applied index.

// applier applies committed entries to the state, one bbolt transaction
// per batch of Ready results, then releases waiters and observers.
func (n *Node) applier() {
	defer n.wg.Done()
	commit := time.NewTimer(time.Hour)
	commit.Stop()
	defer commit.Stop()
	for {
		var tasks []applyTask
		select {
		case t := <-n.applyc:
			tasks = append(tasks, t)
		case <-commit.C:
		case <-n.stopc:
			return
		}
	more:
		for len(tasks) < 64 {
			select {
			case t := <-n.applyc:
				tasks = append(tasks, t)
			default:
				break more
			}
		}
		var ents []*raftpb.Entry
		var resps []*raftpb.Message
		for _, t := range tasks {
			if t.snap != nil {
				if err := n.applyEntries(ents); err != nil {
					n.failAsync(err)
					return
				}
				ents = nil
				if err := n.restoreSnapshot(t.snap); err != nil {
					n.failAsync(err)
					return
				}
			}
			ents = append(ents, t.entries...)
			resps = append(resps, t.resps...)
		}
		if err := n.applyEntries(ents); err != nil {
			n.failAsync(err)
			return
		}
		// Tell raft what is applied (it gates conf changes on it).
		if err := n.stepLocal(resps); err != nil {
			if !errors.Is(err, errStopping) {
				n.failAsync(err)
			}
			return
		}
		if err := n.maybeSnapshot(); err != nil {
			n.failAsync(err)
			return
		}
		// Commit the state transaction when due; otherwise come back when
		// it will be, should no entries arrive before then.
		wait, err := n.st.maybeCommit()
		if err != nil {
			n.failAsync(err)
			return
		}
		if wait > 0 {
			commit.Reset(wait)
		}
	}
}

// applyMemberChange updates the member table and the transport; it reports
// whether this node was removed. The removal of an earlier incarnation of
// this node (see incarnation.go) is applied like any change to the
// configuration, and does not stop it.
func (n *Node) applyMemberChange(cc *raftpb.ConfChange, idx uint64) bool {
	id := cc.GetNodeId()
	sid, addr, inc, cerr := decodeMemberContextInc(cc.GetContext())
	n.mu.Lock()
	defer n.mu.Unlock()
	switch cc.GetType() {
	case raftpb.ConfChangeAddNode, raftpb.ConfChangeAddLearnerNode, raftpb.ConfChangeUpdateNode:
		m := n.members[id]
		if cerr == nil {
			m.ID, m.Addr = sid, addr
			if inc != 0 {
				m.Inc = inc
			}
		}
		switch cc.GetType() {
		case raftpb.ConfChangeAddNode:
			m.Learner = false
		case raftpb.ConfChangeAddLearnerNode:
			m.Learner = true
		}
		n.members[id] = m
		if id != n.id {
			n.tr.setPeer(id, m.Addr)
		}
	case raftpb.ConfChangeRemoveNode:
		recorded := n.members[id].Inc
		delete(n.members, id)
		if id == n.id {
			if cerr != nil || n.removesThisNode(inc) {
				return true
			}
			n.log.Info("raftstore: applied the removal of an earlier incarnation of this node; it is not this node's removal",
				"index", idx, "removed_incarnation", fmt.Sprintf("%016x", inc), "incarnation", fmt.Sprintf("%016x", n.inc))
			break
		}
		if cerr != nil || inc == 0 {
			inc = recorded // the incarnation this removal removes
		}
		n.tr.removePeer(id, removal{inc: inc, index: idx})
	}
	n.syncMembersLocked()
	return false
}

func (n *Node) restoreSnapshot(s *raftpb.Snapshot) error {
	md := s.GetMetadata()
	if md.GetIndex() <= n.applied.Load() {
		return nil
	}
	applied, members, err := n.st.restore(s.GetData())
	if err != nil {
		return fmt.Errorf("raftstore: restore snapshot %d: %w", md.GetIndex(), err)
	}
	if applied != md.GetIndex() {
		return fmt.Errorf("raftstore: snapshot %d carries state applied to %d", md.GetIndex(), applied)
	}
	n.confState = proto.Clone(md.GetConfState()).(*raftpb.ConfState)
	n.snapIndex.Store(md.GetIndex())
	n.mu.Lock()
	old := n.members
	n.members = members
	n.syncMembersLocked()
	n.mu.Unlock()
	for id, m := range old {
		if _, ok := members[id]; !ok && id != n.id {
			n.tr.removePeer(id, removal{inc: m.Inc, index: md.GetIndex()})
		}
	}
	for id, m := range members {
		if id != n.id {
			n.tr.setPeer(id, m.Addr)
		}
	}
	n.setApplied(md.GetIndex())
	n.log.Info("raftstore: restored state from snapshot", "index", md.GetIndex())
	// The entries the snapshot covers are not applied one by one here:
	// tell the observer where the state now is, and settle the waiters
	// whose outcome the snapshot recorded.
	if ro, ok := n.cfg.Observer.(kv.RestoreObserver); ok {
		ro.Restored(md.GetIndex())
	} else if obs := n.cfg.Observer; obs != nil {
		obs.Applied(md.GetIndex(), nil, nil)
	}
	return n.settleFromOutcomes()
}

// settleFromOutcomes finishes every waiting proposal whose commands all
// have a StatusApplied outcome in the state, with those outcomes. Only an
// application settles a command ID for good: a recorded conflict or
// rejection may belong to an earlier attempt with the same ID, so such a
// waiter keeps waiting for its own entry (or its deadline).
func (n *Node) settleFromOutcomes() error {
	n.mu.Lock()
	waiting := make([]*proposal, 0, len(n.waiters))
	for _, p := range n.waiters {
		waiting = append(waiting, p)
	}
	n.mu.Unlock()
	if len(waiting) == 0 {
		return nil
	}
	type settled struct {
		p       *proposal
		results []kv.Result
	}
	var done []settled
	err := n.st.db.View(func(tx *bolt.Tx) error {
		outb := tx.Bucket(bucketOutcomes)
	next:
		for _, p := range waiting {
			results := make([]kv.Result, len(p.ids))
			for i, id := range p.ids {
				if id == "" {
					continue next
				}
				r, ok := decodeOutcome(outb.Get([]byte(id)))
				// An applied outcome may be this proposal's; a fence is
				// final for the ID, whoever proposed it.
				if !ok || (r.Status != kv.StatusApplied && r.Status != kv.StatusFenced) {
					continue next
				}
				results[i] = r
			}
			done = append(done, settled{p, results})
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("raftstore: read outcomes after snapshot restore: %w", err)
	}
	n.mu.Lock()
	for _, d := range done {
		if n.waiters[d.p.req] == d.p {
			delete(n.waiters, d.p.req)
			d.p.finish(d.results, nil)
		}
	}
	n.mu.Unlock()
	if len(done) > 0 {
		n.log.Info("raftstore: settled waiting proposals from the snapshot's outcomes", "count", len(done))
	}
	return nil
}

// maybeSnapshot takes a snapshot every SnapshotCount applied entries, and
// right after a configuration change once the log has been compacted (a
// member added after the last snapshot must receive a snapshot whose
// configuration includes it, or it refuses it), then compacts the
// in-memory log and the WAL locks behind it.
func (n *Node) maybeSnapshot() error {
	due := n.applied.Load()-n.snapIndex.Load() >= n.cfg.SnapshotCount
	if first, err := n.storage.FirstIndex(); err == nil && first > 1 && n.confSinceSnap {
		due = true
	}
	if !due {
		return nil
	}
	if last, err := n.storage.LastIndex(); err != nil || last < n.applied.Load() {
		// The log does not hold the applied index yet (state.db from an
		// older version may be ahead of its own WAL): try again after the
		// next apply, which follows every append of committed entries.
		return nil
	}
	n.confSinceSnap = false
	defer n.msnapshot(time.Now())
	// The snapshot is where older WAL entries stop being the only durable
	// copy of the state: make the state durable first. The state database
	// itself is the snapshot's data; the snapshot records only where it
	// stands (a follower that needs it gets it built then: fillSnapshot).
	if err := n.st.sync(); err != nil {
		return fmt.Errorf("raftstore: sync state before snapshot: %w", err)
	}
	idx := n.applied.Load()
	s, err := n.storage.CreateSnapshot(idx, n.confState, nil)
	if errors.Is(err, raft.ErrSnapOutOfDate) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("raftstore: create snapshot %d: %w", idx, err)
	}
	if err := n.saveSnapshot(s); err != nil {
		return err
	}
	n.snapIndex.Store(idx)
	// Compact only behind what raft has applied too. After a restart with
	// the state ahead of the newest snapshot kept (the next one failed,
	// or the node died before saving it), raft hands the entries between
	// them out again, a few a Ready, while the applier skips them: a
	// compaction behind idx alone removed entries raft had yet to hand
	// out, and raft panicked (TestRestartWithStateAheadOfItsSnapshot).
	if upTo := min(idx, n.raftApplied()); upTo > n.cfg.SnapshotCatchUp {
		if err := n.storage.Compact(upTo - n.cfg.SnapshotCatchUp); err != nil && !errors.Is(err, raft.ErrCompacted) {
			return fmt.Errorf("raftstore: compact log to %d: %w", upTo-n.cfg.SnapshotCatchUp, err)
		}
	}
	if err := n.wal.ReleaseLockTo(idx); err != nil {
		return fmt.Errorf("raftstore: release WAL before %d: %w", idx, err)
	}
	n.purgeSnapFiles(2)
	n.log.Debug("raftstore: snapshot", "index", idx)
	return nil
}

// purgeSnapFiles keeps the newest keep snapshot files.
func (n *Node) purgeSnapFiles(keep int) {
	names, err := filepath.Glob(filepath.Join(n.snapDir, "*.snap"))
	if err != nil || len(names) <= keep {
		return
	}
	sort.Strings(names) // term-index in fixed-width hex sorts by age
	for _, name := range names[:len(names)-keep] {
		_ = os.Remove(name)
	}
}

func (n *Node) setApplied(idx uint64) {
	n.applied.Store(idx)
	n.mu.Lock()
	close(n.appliedCh)
	n.appliedCh = make(chan struct{})
	n.mu.Unlock()
}

func (n *Node) waitApplied(ctx context.Context, idx uint64) error {
	for {
		n.mu.Lock()
		ch := n.appliedCh
		n.mu.Unlock()
		if n.applied.Load() >= idx {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("raftstore: waiting for apply of index %d: %w", idx, ctx.Err())
		case <-n.done:
			return n.stopErr()
		}
	}
}
