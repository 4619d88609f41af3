package sim

import (
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// disk is one node's simulated disk: what a write put there is durable only
// after the fsync that follows it; a crash keeps the durable part and a
// prefix (possibly empty, drawn from the seed) of the writes not yet
// synced, as a write-ahead log's torn tail is cut at restart.
type disk struct {
	hs *raftpb.HardState
	// snaps are the durable snapshots, oldest first, with their state
	// data; ents the durable entries after the oldest (compact).
	snaps   []*raftpb.Snapshot
	ents    []*raftpb.Entry
	pending []diskWrite
}

type diskWrite struct {
	hs   *raftpb.HardState
	ents []*raftpb.Entry
	snap *raftpb.Snapshot
}

// write records a write that is not durable yet.
func (d *disk) write(w diskWrite) { d.pending = append(d.pending, w) }

// sync makes every write so far durable.
func (d *disk) sync() {
	for _, w := range d.pending {
		d.apply(w)
	}
	d.pending = nil
	d.compact()
}

// crash keeps a prefix of keep pending writes and drops the rest; it
// returns how many were lost.
func (d *disk) crash(keep int) int {
	lost := len(d.pending) - keep
	for _, w := range d.pending[:keep] {
		d.apply(w)
	}
	d.pending = nil
	d.compact()
	return lost
}

func (d *disk) apply(w diskWrite) {
	if w.snap != nil {
		d.snaps = []*raftpb.Snapshot{w.snap}
		d.ents = nil // a received snapshot replaces the log
	}
	if len(w.ents) > 0 {
		first := w.ents[0].GetIndex()
		keep := d.ents[:0:0]
		for _, e := range d.ents {
			if e.GetIndex() < first {
				keep = append(keep, e)
			}
		}
		d.ents = append(keep, w.ents...)
	}
	if w.hs != nil {
		d.hs = w.hs
	}
}

// saveLocalSnapshot records a snapshot of applied (hence locally durable)
// entries durably at once, as raftstore's snapshot file and WAL record
// are synced, and releases the durable entries it covers.
func (d *disk) saveLocalSnapshot(s *raftpb.Snapshot) {
	d.snaps = append(d.snaps, s)
	d.compact()
}

// compact releases what no restart can need any more: the snapshots
// older than the one a restart would load now (the durable commit index
// only grows) and the entries that one covers. As with the WAL's released
// segments, nothing a restart may still read is dropped.
func (d *disk) compact() {
	use := d.snap()
	if use == nil {
		return
	}
	idx := use.GetMetadata().GetIndex()
	snaps := d.snaps[:0:0]
	for _, s := range d.snaps {
		if s.GetMetadata().GetIndex() >= idx {
			snaps = append(snaps, s)
		}
	}
	d.snaps = snaps
	keep := d.ents[:0:0]
	for _, e := range d.ents {
		if e.GetIndex() > idx {
			keep = append(keep, e)
		}
	}
	d.ents = keep
}

// has reports whether index is durable here with term (an entry, or
// covered by the durable snapshot).
func (d *disk) has(index, term uint64) bool {
	for _, e := range d.ents {
		if e.GetIndex() == index {
			return e.GetTerm() == term
		}
	}
	for _, s := range d.snaps {
		if s.GetMetadata().GetIndex() >= index {
			return true
		}
	}
	return false
}

// snap is the snapshot a restart loads: the newest durable one at or
// below the durable commit index (etcd's wal.ValidSnapshotEntries, which
// raftstore uses, filters out newer ones: the applier can snapshot an
// entry before the hard state that commits it is synced).
func (d *disk) snap() *raftpb.Snapshot {
	var out *raftpb.Snapshot
	for _, s := range d.snaps {
		if s.GetMetadata().GetIndex() <= d.hs.GetCommit() {
			out = s
		}
	}
	return out
}

// load builds raft's log storage from the durable state (restart).
func (d *disk) load() (*raft.MemoryStorage, error) {
	ms := raft.NewMemoryStorage()
	snap := d.snap()
	if snap != nil {
		if err := ms.ApplySnapshot(proto.Clone(snap).(*raftpb.Snapshot)); err != nil {
			return nil, err
		}
	}
	if d.hs != nil {
		if err := ms.SetHardState(proto.Clone(d.hs).(*raftpb.HardState)); err != nil {
			return nil, err
		}
	}
	var ents []*raftpb.Entry
	for _, e := range d.ents {
		if snap == nil || e.GetIndex() > snap.GetMetadata().GetIndex() {
			ents = append(ents, proto.Clone(e).(*raftpb.Entry))
		}
	}
	if err := ms.Append(ents); err != nil {
		return nil, err
	}
	return ms, nil
}

// lastIndex is the last durable index.
func (d *disk) lastIndex() uint64 {
	if len(d.ents) > 0 {
		return d.ents[len(d.ents)-1].GetIndex()
	}
	if len(d.snaps) > 0 {
		return d.snaps[len(d.snaps)-1].GetMetadata().GetIndex()
	}
	return 0
}
