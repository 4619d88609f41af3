package pipeline

import (
	"errors"
	"fmt"

	"github.com/writ-dev/writ/kv"
	"github.com/writ-dev/writ/schema/ir"
)

// HistoryReader is optionally implemented by a Log that reads applied
// entries back from its retained log (raftstore does). A watcher positioned
// before the events the watch ring retains (after a restart, a snapshot
// install, or a ring overflow) is served from it; without it, such a
// position is compacted.
type HistoryReader interface {
	// ReadApplied returns the applied command batches from index from on,
	// about maxBytes of them; first is the oldest index the log still
	// holds (from < first returns nothing) and next the index after the
	// last one scanned.
	ReadApplied(from, maxBytes uint64) (ents []kv.AppliedEntry, first, next uint64, err error)
}

// CompactedError is a watch position older than anything retained: the
// events before First are gone. The watcher re-lists the state it cares
// about and watches from First. It matches ErrCompacted with errors.Is.
type CompactedError struct {
	First uint64
}

func (e *CompactedError) Error() string {
	return fmt.Sprintf("compacted: re-list state and watch from index %d", e.First)
}

// Is reports ErrCompacted.
func (e *CompactedError) Is(target error) bool { return target == ErrCompacted }

// historyChunk is about how many bytes of log one read takes.
const historyChunk = 1 << 20

// errBehind: the watcher's position is before the ring; fill it from the log.
var errBehind = errors.New("pipeline: watch position before the ring")

// eventOf is the watch event of a committed command (ok=false: a recorded
// conflict, which changed nothing and is not shown).
func eventOf(cmd *kv.Command, res kv.Result, pos int) (Event, bool) {
	if res.Status == kv.StatusConflict || (cmd.Type == kv.TypeFence && res.Status == kv.StatusDuplicate) {
		return Event{}, false // changed nothing; a late fence says nothing new
	}
	ev := Event{Index: res.Index, Pos: pos, ID: cmd.ID, Type: cmd.Type, Class: ir.Class(cmd.Class), Key: cmd.Key,
		Verdict: Verdict(cmd.Verdict), Status: StatusCommitted}
	if ir.Class(cmd.Class) == ir.ClassConfig {
		// watchers see the schema's config type; the ID names the phase
		ev.Type = configTypeOf(cmd)
	}
	switch {
	case res.Status == kv.StatusRejected:
		ev.Status, ev.Reason = StatusRejected, res.Reason
	case res.Status == kv.StatusFenced:
		ev.Status, ev.Reason, ev.FirstIndex = StatusNotCommitted, res.Reason, res.FirstIndex
	case res.Status == kv.StatusDuplicate:
		ev.Duplicate, ev.FirstIndex = true, res.FirstIndex
	case Verdict(cmd.Verdict) == VerdictReject:
		ev.Status = StatusRejected
		if g, err := decodeGuard(cmd.Guard); err == nil {
			ev.Reason = g.Reason
		}
	}
	return ev, true
}

// fillFromLog reads the events from the watcher's position up to the
// ring's first index from the log into w.hist, advancing the position past
// them. It runs without p.mu (the log takes its own locks).
func (w *Watcher) fillFromLog(ringFirst uint64, log Log) error {
	hr, ok := log.(HistoryReader)
	if !ok {
		return &CompactedError{First: ringFirst}
	}
	ents, first, next, err := hr.ReadApplied(w.index, historyChunk)
	if err != nil {
		return fmt.Errorf("pipeline: watch from index %d: %w", w.index, err)
	}
	if w.index < first {
		return &CompactedError{First: first}
	}
	if next <= w.index {
		// nothing the log can give before the ring starts
		return &CompactedError{First: ringFirst}
	}
	for i := range ents {
		ae := &ents[i]
		if ae.Index >= ringFirst {
			break
		}
		for j := range ae.Commands {
			if j >= len(ae.Results) {
				break
			}
			if ae.Index == w.index && j < w.pos {
				continue
			}
			res := ae.Results[j]
			if res.Status == 0 {
				// the decision is no longer retained: not a feed with a guess
				if len(w.hist) > 0 {
					return nil // serve what was read; the next fill stops here
				}
				return &CompactedError{First: ae.Index + 1}
			}
			ev, ok := eventOf(&ae.Commands[j], res, j)
			w.index, w.pos = ae.Index, j+1
			if ok && w.filter.match(&ev) {
				w.hist = append(w.hist, ev)
			}
		}
	}
	if next >= ringFirst {
		next = ringFirst
	}
	if next > w.index {
		w.index, w.pos = next, 0
	}
	return nil
}
