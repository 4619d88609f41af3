package raftstore

import (
	"errors"
	"fmt"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/writ-dev/writ/kv"
)

// ReadApplied reads applied command batches back from the retained log
// (the entries in memory since the last compaction: after a restart, every
// entry the WAL holds after the newest snapshot), starting at index from,
// up to about maxBytes of encoded entries (at least one entry). first is
// the oldest index the log still holds; when from < first nothing is
// returned. next is the index after the last one scanned (conf changes and
// empty entries are scanned but not returned), never beyond the applied
// index + 1.
//
// The log holds the commands, not what apply decided; each Result is
// rebuilt from the outcome table, which records every command ID's latest
// decision: the command's own index → that decision; an applied outcome at
// an earlier index → StatusDuplicate; a decision at a later index → the
// command at this index did not apply and was retried (StatusConflict, the
// decision the write path retries); no retained outcome → Status 0.
func (n *Node) ReadApplied(from, maxBytes uint64) (ents []kv.AppliedEntry, first, next uint64, err error) {
	if err := n.running(); err != nil {
		return nil, 0, 0, err
	}
	first, err = n.storage.FirstIndex()
	if err != nil {
		return nil, 0, 0, fmt.Errorf("raftstore: read log: %w", err)
	}
	if from == 0 {
		from = first
	}
	if from < first {
		return nil, first, from, nil
	}
	applied := n.applied.Load()
	if last, err := n.storage.LastIndex(); err == nil && last < applied {
		applied = last
	}
	if from > applied {
		return nil, first, from, nil
	}
	raw, err := n.storage.Entries(from, applied+1, maxBytes)
	if errors.Is(err, raft.ErrCompacted) {
		first, _ = n.storage.FirstIndex()
		return nil, first, from, nil
	}
	if err != nil {
		return nil, first, from, fmt.Errorf("raftstore: read log %d..%d: %w", from, applied, err)
	}
	next = from
	for _, e := range raw {
		next = e.GetIndex() + 1
		if e.GetType() != raftpb.EntryNormal || len(e.GetData()) == 0 {
			continue
		}
		_, _, cmds, err := decodeEnvelope(e.GetData())
		if err != nil {
			return nil, first, from, fmt.Errorf("raftstore: read log index %d: %w", e.GetIndex(), err)
		}
		ents = append(ents, kv.AppliedEntry{Index: e.GetIndex(), Commands: cmds, Results: n.replayResults(e.GetIndex(), cmds)})
	}
	return ents, first, next, nil
}

// replayResults rebuilds the apply decisions of the commands at idx from
// the outcome table (see ReadApplied).
func (n *Node) replayResults(idx uint64, cmds []kv.Command) []kv.Result {
	out := make([]kv.Result, len(cmds))
	for i := range cmds {
		res := kv.Result{Index: idx}
		o, ok := n.st.outcome(cmds[i].ID)
		switch {
		case !ok:
		case o.Index == idx:
			res = o
		case o.Index < idx && o.Status == kv.StatusApplied:
			res.Status, res.FirstIndex = kv.StatusDuplicate, o.Index
			res.Reason = fmt.Sprintf("duplicate: command ID %q was first applied at index %d", cmds[i].ID, o.Index)
		case o.Index > idx:
			res.Status = kv.StatusConflict
			res.Reason = fmt.Sprintf("did not apply; command ID %q was decided again at index %d", cmds[i].ID, o.Index)
		}
		out[i] = res
	}
	return out
}
