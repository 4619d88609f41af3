package raftstore

import (
	"errors"
	"fmt"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Offline recovery for a node stopped by a fatal apply stop (ApplyError)
// at an entry no build can apply. SkipEntry records, in the node's stopped
// state database, that the committed entry at index is to be applied as
// an empty entry: it changes no key, records no outcome and tells no
// observer. The entry stays in the log; the record is removed once the
// applied index passes it.
//
// This makes the node's state differ from any replica that applied the
// entry. It is safe only when every member skips the same entry (they all
// stopped at it), or when the node is rebuilt from a healthy member
// afterwards.

var keySkip = []byte("skip") // meta: the index of an entry to apply as empty (u64 BE)

// SkipEntry marks the committed entry at index to be skipped by the node
// whose raftstore data directory is dataDir. The node must be stopped, and
// index must not be applied yet.
func SkipEntry(dataDir string, index uint64) error {
	if index == 0 {
		return errors.New("raftstore: skip entry: index 0 is not an entry; give the index the fatal apply stop named")
	}
	path := filepath.Join(dataDir, "state.db")
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		return fmt.Errorf("raftstore: skip entry: open %s (is the node still running? stop it first): %w", path, err)
	}
	defer db.Close()
	return db.Update(func(tx *bolt.Tx) error {
		m := tx.Bucket(bucketMeta)
		if m == nil {
			return fmt.Errorf("raftstore: skip entry: %s holds no state; is %s a raftstore data directory?", path, dataDir)
		}
		if applied := u64(m.Get(keyApplied)); index <= applied {
			return fmt.Errorf("raftstore: skip entry: index %d is already applied (applied index %d); nothing to skip", index, applied)
		}
		return m.Put(keySkip, putU64(index))
	})
}

// loadSkip returns the index of the entry to skip, or 0.
func (s *stateDB) loadSkip() (uint64, error) {
	var idx uint64
	err := s.db.View(func(tx *bolt.Tx) error {
		idx = u64(tx.Bucket(bucketMeta).Get(keySkip))
		return nil
	})
	return idx, err
}
