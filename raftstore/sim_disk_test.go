package raftstore

import (
	"errors"
	"math/rand/v2"

	"go.etcd.io/etcd/server/v3/storage/wal/walpb"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// The simulation's disk for one node: the WAL as a list of records, of
// which a prefix is synced, and the snapshot files (written with fsync, as
// etcd's snap package does). Save fsyncs exactly when etcd's WAL does
// (raft.MustSync): a hard state that only moves the commit index stays
// unsynced until the next sync. A crash keeps the synced records and a
// random prefix of the unsynced ones (a real disk may have written some of
// them), and the fault plan may crash a node inside Save, after the write
// and before the fsync: Save returns an error and the node dies there.
// state.db stays a real bbolt file: a crash loses its open transaction, as
// a killed process does.

// errSimCrash is what Save returns when the node crashes inside it.
var errSimCrash = errors.New("simulated crash before fsync")

type walRecord struct {
	hs   *raftpb.HardState
	ents []*raftpb.Entry
	snap *walpb.Snapshot
}

type simDisk struct {
	created bool
	meta    []byte
	recs    []walRecord // every record written; recs[:synced] are durable
	synced  int
	snaps   []*raftpb.Snapshot // snapshot files (durable when written)
	lastHS  *raftpb.HardState  // the last hard state written (MustSync)

	// crashInSave is asked before each fsync; true crashes the node there.
	crashInSave func() bool
	// crashed is set when Save crashed the node; the world then crashes it.
	crashed bool
}

func (d *simDisk) load() (bool, *raftpb.Snapshot, []byte, *raftpb.HardState, []*raftpb.Entry, walLog, error) {
	if !d.created {
		return false, nil, nil, nil, nil, nil, nil
	}
	d.crashed = false
	recs := d.recs[:d.synced]
	// The newest snapshot file that a durable WAL record names and that the
	// durable hard state has committed (wal.ValidSnapshotEntries and
	// snap.LoadNewestAvailable).
	var commit uint64
	for _, r := range recs {
		if r.hs != nil {
			commit = r.hs.GetCommit()
		}
	}
	var snap *raftpb.Snapshot
	for i := len(d.snaps) - 1; i >= 0 && snap == nil; i-- {
		s := d.snaps[i]
		if s.GetMetadata().GetIndex() > commit {
			continue
		}
		for _, r := range recs {
			if r.snap != nil && r.snap.GetIndex() == s.GetMetadata().GetIndex() && r.snap.GetTerm() == s.GetMetadata().GetTerm() {
				snap = proto.Clone(s).(*raftpb.Snapshot)
				break
			}
		}
	}
	var start uint64
	if snap != nil {
		start = snap.GetMetadata().GetIndex()
	}
	// wal.ReadAll: the last hard state, and the entries after the
	// snapshot, a later entry replacing the tail from its index on.
	var hs *raftpb.HardState
	var ents []*raftpb.Entry
	for _, r := range recs {
		if r.hs != nil {
			hs = r.hs
		}
		for _, e := range r.ents {
			if e.GetIndex() <= start {
				continue
			}
			off := int(e.GetIndex() - start - 1)
			if off > len(ents) {
				return true, nil, nil, nil, nil, nil, errors.New("sim disk: WAL has a gap in its entries")
			}
			ents = append(ents[:off], proto.Clone(e).(*raftpb.Entry))
		}
	}
	if hs == nil {
		hs = &raftpb.HardState{}
	} else {
		hs = proto.Clone(hs).(*raftpb.HardState)
	}
	d.lastHS = hs
	return true, snap, d.meta, hs, ents, (*simWAL)(d), nil
}

func (d *simDisk) create(meta []byte) (walLog, error) {
	d.created, d.meta = true, append([]byte(nil), meta...)
	d.recs, d.synced, d.lastHS = nil, 0, &raftpb.HardState{}
	return (*simWAL)(d), nil
}

func (d *simDisk) remove() error {
	d.created, d.recs, d.synced, d.snaps = false, nil, 0, nil
	return nil
}

func (d *simDisk) SaveSnap(s *raftpb.Snapshot) error {
	d.snaps = append(d.snaps, proto.Clone(s).(*raftpb.Snapshot))
	return nil
}

// crash loses what was not synced, but for a random prefix of it.
func (d *simDisk) crash(rng *rand.Rand) {
	if unsynced := len(d.recs) - d.synced; unsynced > 0 {
		d.synced += rng.IntN(unsynced + 1)
	}
	d.recs = d.recs[:d.synced]
}

// durable reports whether the synced log holds the entry (index, term):
// as an entry not since replaced, or within a durable snapshot (which holds
// only committed entries).
func (d *simDisk) durable(index, term uint64) bool {
	var got uint64
	for _, r := range d.recs[:d.synced] {
		if r.snap != nil && r.snap.GetIndex() >= index {
			return true
		}
		if len(r.ents) == 0 || r.ents[0].GetIndex() > index {
			continue
		}
		// An append from index first on replaces the tail from there.
		got = 0
		if last := r.ents[len(r.ents)-1].GetIndex(); index <= last {
			got = r.ents[index-r.ents[0].GetIndex()].GetTerm()
		}
	}
	return got == term
}

// simWAL is the disk's WAL side.
type simWAL simDisk

func (w *simWAL) Save(hs *raftpb.HardState, ents []*raftpb.Entry) error {
	d := (*simDisk)(w)
	r := walRecord{}
	if hs != nil && !raft.IsEmptyHardState(hs) {
		r.hs = proto.Clone(hs).(*raftpb.HardState)
	}
	for _, e := range ents {
		r.ents = append(r.ents, proto.Clone(e).(*raftpb.Entry))
	}
	if r.hs == nil && len(r.ents) == 0 {
		return nil
	}
	d.recs = append(d.recs, r)
	prev := d.lastHS
	if r.hs != nil {
		d.lastHS = r.hs
	}
	if prev == nil {
		prev = &raftpb.HardState{}
	}
	if !raft.MustSync(d.lastHS, prev, len(ents)) {
		return nil
	}
	if d.crashInSave != nil && d.crashInSave() {
		d.crashed = true
		return errSimCrash
	}
	d.synced = len(d.recs)
	return nil
}

func (w *simWAL) SaveSnapshot(s *walpb.Snapshot) error {
	d := (*simDisk)(w)
	d.recs = append(d.recs, walRecord{snap: proto.Clone(s).(*walpb.Snapshot)})
	d.synced = len(d.recs)
	return nil
}

func (w *simWAL) ReleaseLockTo(uint64) error { return nil }
func (w *simWAL) Close() error               { return nil }
