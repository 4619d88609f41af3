package raftstore

import (
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// logStorage is raft's in-memory log storage. Its snapshots carry only
// metadata: the state database is the data of a local snapshot, and a
// follower that needs one gets it built from the state when it is sent
// (Node.fillSnapshot). A received snapshot's data is saved to the snap file
// and restored into the state, never kept here.
type logStorage struct {
	*raft.MemoryStorage
}

func newLogStorage() *logStorage {
	return &logStorage{MemoryStorage: raft.NewMemoryStorage()}
}

// applySnapshot replaces the log with a snapshot (received or loaded),
// keeping its metadata only.
func (s *logStorage) applySnapshot(snap *raftpb.Snapshot) error {
	return s.MemoryStorage.ApplySnapshot(&raftpb.Snapshot{Metadata: snap.GetMetadata()})
}
