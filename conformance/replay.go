package conformance

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/writ-dev/writ/kv"
	"github.com/writ-dev/writ/schema/ir"
)

// property.apply-idempotent replays the committed entries of every workload
// case through the real replicated state machine: the node's applied state
// in a bbolt file, opened through Options.OpenState (writ links raftstore's
// OpenReplayState). Each case applies the committed batches once, again on
// top of the result, and again after the file is closed and reopened (a
// restart without snapshot); the state hash must not move. A batch the state
// machine cannot apply at all (an error or a panic on the apply path) is a
// finding, not a crash of the run.

// ReplayState is a replicated state machine on disk, as the apply-idempotent
// check drives it.
type ReplayState interface {
	// Apply applies batch as the committed entry at index, also an index
	// it applied before.
	Apply(index uint64, batch []kv.Command, checker kv.Checker) ([]kv.Result, error)
	// Hash is the applied index and the digest of the replicated state.
	Hash() (applied uint64, sum [32]byte, err error)
	Close() error
}

// StateOpener opens (creating) the state file at path.
type StateOpener func(path string) (ReplayState, error)

// commitRecorder sits between the test log and the pipeline: it keeps
// every committed batch, in the log's encoding, for the replay.
type commitRecorder struct {
	next kv.ApplyObserver
	mu   sync.Mutex
	ents []recordedBatch
	// gap is set when the log committed an entry the observer was not told
	// of (a restore): the recorded history is then not the whole log.
	gap bool
}

type recordedBatch struct {
	index   uint64
	data    []byte
	results []kv.Result
}

func (r *commitRecorder) Applied(index uint64, batch []kv.Command, results []kv.Result) {
	r.mu.Lock()
	r.ents = append(r.ents, recordedBatch{index: index, data: kv.AppendBatch(nil, batch), results: append([]kv.Result(nil), results...)})
	r.mu.Unlock()
	r.next.Applied(index, batch, results)
}

func (r *commitRecorder) Restored(index uint64) {
	r.mu.Lock()
	if index > 0 {
		r.gap = true
	}
	r.mu.Unlock()
	if ro, ok := r.next.(kv.RestoreObserver); ok {
		ro.Restored(index)
	}
}

func (r *commitRecorder) batches() ([]recordedBatch, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]recordedBatch(nil), r.ents...), r.gap
}

// checkApplyIdempotent is property.apply-idempotent: the workload's
// replays, NOT RUN without a state machine to replay into.
func checkApplyIdempotent(ctx context.Context, e *Env) Outcome {
	if e.Opts.OpenState == nil {
		return notRun("no replicated state machine to replay into (Options.OpenState; writ links raftstore.OpenReplayState)")
	}
	return workloadCheck(func(w *workload) *collector { return &w.idem })(ctx, e)
}

// replayReal replays the rig's committed history into a fresh state file
// under dir and reports what changed into c.
func replayReal(open StateOpener, dir string, checker kv.Checker, rec *commitRecorder, c *collector) {
	ents, gap := rec.batches()
	if gap || len(ents) == 0 {
		return
	}
	cmds := make([][]kv.Command, len(ents))
	for i, b := range ents {
		var err error
		if cmds[i], err = kv.DecodeBatch(b.data); err != nil {
			c.add(Finding{Code: CodeCheckCrashed, Status: ir.StatusBlocked, Subject: "workload",
				Message: fmt.Sprintf("committed batch %d does not decode: %v", b.index, err), Fix: "report it: the log's own encoding failed"})
			return
		}
	}
	path := filepath.Join(dir, "state.db")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		c.add(Finding{Code: CodeCheckCrashed, Status: ir.StatusBlocked, Subject: "state",
			Message: fmt.Sprintf("no directory for the state file: %v", err), Fix: "check the temporary directory is writable"})
		return
	}
	st, err := open(path)
	if err != nil {
		c.add(Finding{Code: CodeApplyFailed, Status: ir.StatusBlocked, Subject: "state",
			Message: fmt.Sprintf("the state file could not be opened: %v", err), Fix: "check the temporary directory is writable"})
		return
	}
	closed := false
	defer func() {
		if !closed {
			_ = st.Close()
		}
	}()
	// pass applies every recorded batch once; it returns false after a
	// finding that makes the rest meaningless.
	pass := func(what string, first bool) bool {
		for i, b := range ents {
			c.out.Cases++
			res, err := st.Apply(b.index, cmds[i], checker)
			if err != nil {
				c.add(Finding{Code: CodeApplyFailed, Status: ir.StatusBlocked, Subject: "workload",
					Message: fmt.Sprintf("%s: the state machine could not apply committed entry %d (%s): %v", what, b.index, describeBatch(cmds[i]), err),
					Fix:     "every committed entry the schema allows must apply on every replica; a failure here stops every node on the same entry"})
				return false
			}
			if first {
				for j := range res {
					if j < len(b.results) && res[j].Status != b.results[j].Status {
						c.add(Finding{Code: CodeApplyNotIdempotent, Status: ir.StatusBlocked, Subject: "workload",
							Message: fmt.Sprintf("entry %d command %q: the state machine decided %s, the pipeline's log decided %s", b.index, cmds[i][j].ID, res[j].Status, b.results[j].Status),
							Fix:     "apply must be a deterministic function of the entry and the state (W7, W9)"})
						break
					}
				}
			}
		}
		return true
	}
	hash := func(what string) ([32]byte, bool) {
		_, h, err := st.Hash()
		if err != nil {
			c.add(Finding{Code: CodeApplyFailed, Status: ir.StatusBlocked, Subject: "state",
				Message: fmt.Sprintf("%s: state hash: %v", what, err), Fix: "report it"})
			return h, false
		}
		return h, true
	}
	if !pass("first apply", true) {
		return
	}
	want, ok := hash("after the first apply")
	if !ok || !pass("second apply", false) {
		return
	}
	if got, ok := hash("after the second apply"); !ok {
		return
	} else if got != want {
		c.add(Finding{Code: CodeApplyNotIdempotent, Status: ir.StatusBlocked, Subject: "workload",
			Message: fmt.Sprintf("applying the %d committed entries a second time changed the state hash from %x to %x", len(ents), want[:8], got[:8]),
			Fix:     "every effect must be CAS-guarded or carry a command ID"})
		return
	}
	closed = true
	if err := st.Close(); err != nil {
		c.add(Finding{Code: CodeApplyFailed, Status: ir.StatusBlocked, Subject: "state",
			Message: fmt.Sprintf("closing the state file: %v", err), Fix: "report it"})
		return
	}
	if st, err = open(path); err != nil {
		c.add(Finding{Code: CodeApplyFailed, Status: ir.StatusBlocked, Subject: "state",
			Message: fmt.Sprintf("reopening the state file: %v", err), Fix: "report it"})
		return
	}
	closed = false
	if got, ok := hash("after reopening"); !ok {
		return
	} else if got != want {
		c.add(Finding{Code: CodeApplyNotIdempotent, Status: ir.StatusBlocked, Subject: "state",
			Message: fmt.Sprintf("closing and reopening the state file changed its hash from %x to %x", want[:8], got[:8]),
			Fix:     "the applied state must be persisted whole when the node stops"})
		return
	}
	if !pass("replay after restart", false) {
		return
	}
	if got, ok := hash("after the replay after restart"); ok && got != want {
		c.add(Finding{Code: CodeApplyNotIdempotent, Status: ir.StatusBlocked, Subject: "workload",
			Message: fmt.Sprintf("replaying the %d committed entries after a restart without snapshot changed the state hash from %x to %x", len(ents), want[:8], got[:8]),
			Fix:     "every effect must be CAS-guarded or carry a command ID"})
	}
}

// describeBatch names a batch's commands and their largest write, for
// findings.
func describeBatch(cmds []kv.Command) string {
	largest := 0
	s := ""
	for i, c := range cmds {
		if i < 3 {
			if s != "" {
				s += ", "
			}
			s += c.Type + " " + c.ID
		}
		for _, w := range c.Effect.Writes {
			largest = max(largest, len(w.Value))
		}
	}
	if len(cmds) > 3 {
		s += fmt.Sprintf(" and %d more", len(cmds)-3)
	}
	return fmt.Sprintf("%s; largest value %d bytes", s, largest)
}

var _ kv.RestoreObserver = (*commitRecorder)(nil)
