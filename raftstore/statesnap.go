package raftstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"sort"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// State snapshots: the whole state database as one byte stream, restored
// in place, and the membership record they carry.

// Snapshot data: "WRITSNAP" version(1) then records
// bucket(u8, 1-based index into allBuckets) klen:uvarint k vlen:uvarint v,
// terminated by a zero byte.
var snapMagic = []byte("WRITSNAP\x01")

// snapshot serializes the committed state (after committing the open
// transaction) into a raft snapshot named by the state's own applied
// index, term and configuration.
func (s *stateDB) snapshot() (*raftpb.Snapshot, error) {
	if err := s.flush(); err != nil {
		return nil, err
	}
	var snap *raftpb.Snapshot
	err := s.db.View(func(tx *bolt.Tx) error {
		m := tx.Bucket(bucketMeta)
		cs := &raftpb.ConfState{}
		if err := proto.Unmarshal(m.Get(keyConfState), cs); err != nil {
			return fmt.Errorf("decode configuration: %w", err)
		}
		applied, term := u64(m.Get(keyApplied)), u64(m.Get(keyAppliedTerm))
		if applied == 0 || term == 0 || len(cs.GetVoters()) == 0 {
			return errors.New("no applied state with its term and configuration recorded yet")
		}
		data, err := snapshotData(tx)
		if err != nil {
			return err
		}
		snap = &raftpb.Snapshot{Data: data, Metadata: &raftpb.SnapshotMetadata{Index: &applied, Term: &term, ConfState: cs}}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("raftstore: snapshot of the state: %w", err)
	}
	return snap, nil
}

func snapshotData(tx *bolt.Tx) ([]byte, error) {
	// The database size bounds the records' size: one allocation.
	data := append(make([]byte, 0, tx.Size()+int64(len(snapMagic))+1), snapMagic...)
	for i, name := range allBuckets {
		err := tx.Bucket(name).ForEach(func(k, v []byte) error {
			data = append(data, byte(i+1))
			data = binary.AppendUvarint(data, uint64(len(k)))
			data = append(data, k...)
			data = binary.AppendUvarint(data, uint64(len(v)))
			data = append(data, v...)
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return append(data, 0), nil
}

// restore replaces the whole state with snapshot data in one transaction.
func (s *stateDB) restore(data []byte) (applied uint64, members map[uint64]memberInfo, err error) {
	if !bytes.HasPrefix(data, snapMagic) {
		return 0, nil, errors.New("raftstore: snapshot data: bad magic or version")
	}
	p := data[len(snapMagic):]
	if err := s.flush(); err != nil {
		return 0, nil, err
	}
	err = s.db.Update(func(tx *bolt.Tx) error {
		bs := make([]*bolt.Bucket, len(allBuckets))
		for i, name := range allBuckets {
			if err := tx.DeleteBucket(name); err != nil && !errors.Is(err, berrors.ErrBucketNotFound) {
				return err
			}
			b, err := tx.CreateBucket(name)
			if err != nil {
				return err
			}
			bs[i] = b
		}
		for {
			if len(p) == 0 {
				return errors.New("raftstore: snapshot data: truncated")
			}
			bi := int(p[0])
			p = p[1:]
			if bi == 0 {
				break
			}
			if bi > len(bs) {
				return fmt.Errorf("raftstore: snapshot data: unknown bucket %d", bi)
			}
			var k, v []byte
			var ok bool
			if k, p, ok = readLP(p); !ok {
				return errors.New("raftstore: snapshot data: bad key")
			}
			if v, p, ok = readLP(p); !ok {
				return errors.New("raftstore: snapshot data: bad value")
			}
			if err := bs[bi-1].Put(k, v); err != nil {
				return err
			}
		}
		// The sender's sum came with its meta bucket; recompute it from
		// the records rather than trust it (or miss it, from an older node).
		if err := storeFullSum(tx); err != nil {
			return err
		}
		m := bs[0]
		applied = u64(m.Get(keyApplied))
		var derr error
		members, derr = decodeMembers(m.Get(keyMembers))
		return derr
	})
	return applied, members, err
}

func readLP(p []byte) (val, rest []byte, ok bool) {
	l, n := binary.Uvarint(p)
	if n <= 0 || l > uint64(len(p)-n) {
		return nil, nil, false
	}
	return p[n : n+int(l)], p[n+int(l):], true
}

// memberInfo is what the state knows about one consensus member.
type memberInfo struct {
	ID      string
	Addr    string
	Learner bool
	// Inc is the incarnation of the member's data directory (0: unknown).
	Inc uint64
}

func encodeMembers(m map[uint64]memberInfo) []byte {
	ids := make([]uint64, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	b := binary.AppendUvarint(nil, uint64(len(ids)))
	for _, id := range ids {
		mi := m[id]
		b = binary.AppendUvarint(b, id)
		b = appendLP(b, mi.ID)
		b = appendLP(b, mi.Addr)
		if mi.Learner {
			b = append(b, 1)
		} else {
			b = append(b, 0)
		}
	}
	return appendIncarnations(b, ids, m)
}

func appendLP(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func decodeMembers(b []byte) (map[uint64]memberInfo, error) {
	m := map[uint64]memberInfo{}
	if len(b) == 0 {
		return m, nil
	}
	n, k := binary.Uvarint(b)
	if k <= 0 {
		return nil, errors.New("raftstore: members: bad count")
	}
	b = b[k:]
	for i := uint64(0); i < n; i++ {
		id, k := binary.Uvarint(b)
		if k <= 0 {
			return nil, errors.New("raftstore: members: bad id")
		}
		b = b[k:]
		var sid, addr []byte
		var ok bool
		if sid, b, ok = readLP(b); !ok {
			return nil, errors.New("raftstore: members: bad name")
		}
		if addr, b, ok = readLP(b); !ok {
			return nil, errors.New("raftstore: members: bad address")
		}
		if len(b) < 1 {
			return nil, errors.New("raftstore: members: truncated")
		}
		m[id] = memberInfo{ID: string(sid), Addr: string(addr), Learner: b[0] == 1}
		b = b[1:]
	}
	if len(b) > 0 {
		if err := decodeIncarnations(b, m); err != nil {
			return nil, err
		}
	}
	return m, nil
}
