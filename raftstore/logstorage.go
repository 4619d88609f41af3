package raftstore

import (
	"sync"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// logStorage is raft's in-memory log storage, except that the newest
// snapshot's data (the whole applied state) is held here instead of inside
// MemoryStorage, which copies a snapshot in full on every CreateSnapshot,
// ApplySnapshot and Snapshot call. The data is never modified once taken,
// so handing raft the same slice is safe.
type logStorage struct {
	*raft.MemoryStorage

	// mu is held around the MemoryStorage snapshot calls so that the
	// metadata and the data always describe the same snapshot.
	mu        sync.Mutex
	dataIndex uint64
	data      []byte
}

func newLogStorage() *logStorage {
	return &logStorage{MemoryStorage: raft.NewMemoryStorage()}
}

// Snapshot implements raft.Storage.
func (s *logStorage) Snapshot() (*raftpb.Snapshot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	snap, err := s.MemoryStorage.Snapshot()
	if err != nil {
		return nil, err
	}
	if idx := snap.GetMetadata().GetIndex(); idx != 0 {
		if idx != s.dataIndex {
			// Cannot happen (both change under mu); never let raft send
			// a snapshot without its state.
			return nil, raft.ErrSnapshotTemporarilyUnavailable
		}
		snap.Data = s.data
	}
	return snap, nil
}

// createSnapshot records a snapshot of the applied state at index i and
// returns it, data included.
func (s *logStorage) createSnapshot(i uint64, cs *raftpb.ConfState, data []byte) (*raftpb.Snapshot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	snap, err := s.MemoryStorage.CreateSnapshot(i, cs, nil)
	if err != nil {
		return nil, err
	}
	s.dataIndex, s.data = i, data
	snap.Data = data
	return snap, nil
}

// applySnapshot replaces the log with a snapshot (received or loaded).
func (s *logStorage) applySnapshot(snap *raftpb.Snapshot) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.MemoryStorage.ApplySnapshot(&raftpb.Snapshot{Metadata: snap.GetMetadata()}); err != nil {
		return err
	}
	s.dataIndex, s.data = snap.GetMetadata().GetIndex(), snap.GetData()
	return nil
}
