package raftstore

import (
	"fmt"

	"github.com/writ-dev/writ/kv"
)

// ReplayState is a node's applied state (a bbolt file in the node's format)
// driven without raft: committed batches go through the same apply path as
// a node's applier uses for a normal log entry (the entry envelope, dedup by
// command ID, the checker, revision preconditions, writes, the outcome table
// and the applied index). It exists so that replay can be tested on the real
// state machine (W9): apply the same entries twice, or again after the file
// is closed and reopened, and compare Hash.
type ReplayState struct {
	st *stateDB
}

// replayRetention is Config.OutcomeRetention's default.
const replayRetention = 100000

// OpenReplayState opens (creating if needed) the state file at path, with
// the node's default outcome retention.
func OpenReplayState(path string) (*ReplayState, error) {
	st, err := openState(path, replayRetention)
	if err != nil {
		return nil, err
	}
	return &ReplayState{st: st}, nil
}

// Apply applies batch as the committed normal entry at index and returns
// one result per command. Unlike a node, it applies an index at or below
// the applied one again (that replay is what the caller tests). A panic on
// the apply path comes back as an error naming the index, and what the
// open transaction held is discarded.
func (r *ReplayState) Apply(index uint64, batch []kv.Command, checker kv.Checker) (results []kv.Result, err error) {
	data := encodeEnvelope(0, 0, batch)
	defer func() {
		if p := recover(); p != nil {
			r.st.wmu.Lock()
			r.st.rollbackLocked()
			r.st.wmu.Unlock()
			results, err = nil, fmt.Errorf("raftstore: replay: apply index %d panicked: %v", index, p)
		}
	}()
	_, _, cmds, err := decodeEnvelope(data)
	if err != nil {
		return nil, fmt.Errorf("raftstore: replay: index %d: %w", index, err)
	}
	err = r.st.apply(1, func(atx *applyTx) error {
		res, err := atx.applyCommands(index, cmds, checker)
		if err != nil {
			return err
		}
		results = res
		if err := atx.finish(); err != nil {
			return err
		}
		if index > u64(atx.mb.Get(keyApplied)) {
			return atx.mb.Put(keyApplied, putU64(index))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("raftstore: replay: apply index %d: %w", index, err)
	}
	return results, nil
}

// Hash returns the applied index and the digest of the replicated state
// that a node reports as its state hash.
func (r *ReplayState) Hash() (applied uint64, sum [32]byte, err error) {
	return r.st.hash()
}

// Close commits and syncs the state and closes the file.
func (r *ReplayState) Close() error { return r.st.close() }
