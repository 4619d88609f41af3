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
//
// The table holds one record per ID, so an ID that occurs more than once at
// idx (the same fact logged twice in one batch) has one decision for all its
// copies there. Apply decided them in order: copies before the one the record
// names did not apply (they were decided again, as StatusConflict says), and
// copies after it kept its decision (a duplicate of an application, or
// fenced). The record names the applied copy by its payload digest and a
// fence by its type; any other decision is the last copy's.
func (n *Node) replayResults(idx uint64, cmds []kv.Command) []kv.Result {
	out := make([]kv.Result, len(cmds))
	var decider map[string]int // ID → position of its decided copy, for IDs repeated at idx
	for i := range cmds {
		res := kv.Result{Index: idx}
		id := cmds[i].ID
		o, ok := n.st.outcome(id)
		switch {
		case !ok:
		case o.Index == idx:
			pos, repeated := 0, false
			if len(cmds) > 1 { // a lone command repeats nothing
				if decider == nil {
					decider = repeatedDeciders(cmds, n.st.outcome, idx)
				}
				pos, repeated = decider[id]
			}
			switch {
			case !repeated || pos == i:
				res = o
			case i < pos:
				res.Status = kv.StatusConflict
				res.Reason = fmt.Sprintf("did not apply; command ID %q was decided again at index %d", id, idx)
			case o.Status == kv.StatusApplied:
				res.Status, res.FirstIndex, res.Digest, res.Verdict = kv.StatusDuplicate, idx, o.Digest, o.Verdict
				res.Reason = fmt.Sprintf("duplicate: command ID %q was first applied at index %d", id, idx)
			default: // after a fence at this index
				res.Status, res.FirstIndex = kv.StatusFenced, idx
				res.Reason = fmt.Sprintf("not committed: command ID %q was fenced at index %d", id, idx)
			}
		case o.Index < idx && o.Status == kv.StatusApplied:
			res.Status, res.FirstIndex = kv.StatusDuplicate, o.Index
			res.Reason = fmt.Sprintf("duplicate: command ID %q was first applied at index %d", id, o.Index)
		case o.Index > idx:
			res.Status = kv.StatusConflict
			res.Reason = fmt.Sprintf("did not apply; command ID %q was decided again at index %d", id, o.Index)
		}
		out[i] = res
	}
	return out
}

// repeatedDeciders maps each ID that occurs more than once in cmds, and
// whose recorded decision is at idx, to the position of the copy that
// decision belongs to (see replayResults). It is empty (not nil) when no ID
// repeats, the common case.
func repeatedDeciders(cmds []kv.Command, outcome func(string) (kv.Result, bool), idx uint64) map[string]int {
	count := make(map[string]int, len(cmds))
	for i := range cmds {
		count[cmds[i].ID]++
	}
	dec := map[string]int{}
	for id, c := range count {
		if c < 2 || id == "" {
			continue
		}
		o, ok := outcome(id)
		if !ok || o.Index != idx {
			continue
		}
		pos := -1
		for i := range cmds {
			if cmds[i].ID != id {
				continue
			}
			switch {
			case o.Status == kv.StatusApplied && kv.PayloadDigest(cmds[i].Payload) == o.Digest,
				o.Status == kv.StatusFenced && cmds[i].Type == kv.TypeFence:
				if pos < 0 {
					pos = i
				}
			case o.Status != kv.StatusApplied && o.Status != kv.StatusFenced:
				pos = i // the last copy's decision
			}
		}
		if pos < 0 { // no copy matches the record: the first one decided
			for i := range cmds {
				if cmds[i].ID == id {
					pos = i
					break
				}
			}
		}
		dec[id] = pos
	}
	return dec
}
