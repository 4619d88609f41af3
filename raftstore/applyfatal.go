package raftstore

import (
	"fmt"
	"runtime/debug"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/writ-dev/writ/kv"
)

// ApplyError is the fatal error of a node that cannot apply a committed
// entry: the entry could not be decoded, or applying it failed or
// panicked. The node stops with nothing of that entry (or of the
// transaction it was applied in) kept; since the entry is committed, a
// restart of the same build stops at the same entry again. Err and Done
// report it, and errors.As finds it through the node's fatal error.
type ApplyError struct {
	Index     uint64 // raft log index of the entry
	Term      uint64 // its term
	Type      string // raft entry type (EntryNormal, EntryConfChange, ...)
	CommandID string // the command being applied ("" if none, or not decoded)
	Commands  int    // commands the entry carries (0 if not decoded)
	Panic     bool   // applying it panicked (Stack holds where)
	Stack     string
	Err       error
}

func (e *ApplyError) Error() string {
	what := "failed"
	if e.Panic {
		what = "panicked"
	}
	cmd := "not decoded"
	if e.Commands > 0 {
		cmd = fmt.Sprintf("command %q of %d", e.CommandID, e.Commands)
	}
	return fmt.Sprintf("raftstore: apply of committed entry at index %d (term %d, %s, %s) %s: %v; "+
		"nothing of it was applied, and every restart of this build stops at the same entry: "+
		"upgrade to a build that applies it, or rebuild this node from a healthy member "+
		"(remove it from the cluster, delete its data directory, add it again); "+
		"if every member stops here, see \"Fatal apply stop\" in docs/operator.md",
		e.Index, e.Term, e.Type, cmd, what, e.Err)
}

func (e *ApplyError) Unwrap() error { return e.Err }

// entryApplyError describes a failure to apply entry e.
func entryApplyError(e *raftpb.Entry, cmdID string, cmds int, err error) *ApplyError {
	return &ApplyError{Index: e.GetIndex(), Term: e.GetTerm(), Type: e.GetType().String(), CommandID: cmdID, Commands: cmds, Err: err}
}

// recoverApply turns a panic while applying entry e into an ApplyError in
// *errp. cur reports the command being applied when it panicked.
func recoverApply(e *raftpb.Entry, cur func() (string, int), errp *error) {
	p := recover()
	if p == nil {
		return
	}
	id, n := cur()
	ae := entryApplyError(e, id, n, fmt.Errorf("%v", p))
	ae.Panic, ae.Stack = true, string(debug.Stack())
	*errp = ae
}

// observeApplied tells the observer about one applied entry; a panic in
// the observer is a fatal apply error for that entry.
func observeApplied(obs kv.ApplyObserver, d appliedEntry) (err error) {
	defer func() {
		if p := recover(); p != nil {
			ae := &ApplyError{Index: d.index, Term: d.term, Type: raftpb.EntryNormal.String(), Commands: len(d.cmds),
				Panic: true, Stack: string(debug.Stack()), Err: fmt.Errorf("observer: %v", p)}
			if len(d.cmds) > 0 {
				ae.CommandID = d.cmds[0].ID // the observer takes the batch whole
			}
			err = ae
		}
	}()
	obs.Applied(d.index, d.cmds, d.results)
	return nil
}
