package conformance

import (
	"strings"
	"testing"

	"github.com/writ-dev/writ/kv"
)

// TestApplyIdempotentRealState runs property.apply-idempotent over the jobs
// domain with the real plugin and raftstore's real state file.
func TestApplyIdempotentRealState(t *testing.T) {
	opts := jobsOptions(t, TierProperty)
	opts.Cases = 2000
	opts.checks = []string{"property.apply-idempotent"}
	rep := mustRun(t, opts)
	c, _ := rep.Check("property.apply-idempotent")
	if c.Result != Pass || c.Cases == 0 {
		t.Fatalf("property.apply-idempotent: %s (%d cases) %s %v, want PASS", c.Result, c.Cases, c.Reason, c.Findings)
	}
	t.Logf("%d cases", c.Cases)
}

// noDedupState is a deliberately broken state machine for the test below:
// it forgets the dedup table on replay, applying every batch it has seen
// before again as a new entry with its command IDs stripped.
type noDedupState struct {
	ReplayState
	seen map[uint64]bool
	next uint64
}

func (s *noDedupState) Apply(index uint64, batch []kv.Command, ch kv.Checker) ([]kv.Result, error) {
	if !s.seen[index] {
		s.seen[index] = true
		s.next = max(s.next, index)
		return s.ReplayState.Apply(index, batch, ch)
	}
	s.next++
	stripped := make([]kv.Command, len(batch))
	for i, c := range batch {
		c.ID = ""
		c.Effect.Writes = append([]kv.Write(nil), c.Effect.Writes...)
		for j := range c.Effect.Writes {
			c.Effect.Writes[j].Unconditional = true
		}
		stripped[i] = c
	}
	return s.ReplayState.Apply(s.next, stripped, nil)
}

// TestApplyIdempotentCatchesReplay_FakeNoDedup shows the check can fail: a
// state machine without dedup on replay changes the state hash.
func TestApplyIdempotentCatchesReplay_FakeNoDedup(t *testing.T) {
	opts := jobsOptions(t, TierProperty)
	opts.Cases = 2000
	opts.checks = []string{"property.apply-idempotent"}
	opts.OpenState = func(path string) (ReplayState, error) {
		st, err := openRaftState(path)
		if err != nil {
			return nil, err
		}
		return &noDedupState{ReplayState: st, seen: map[uint64]bool{}}, nil
	}
	rep := mustRun(t, opts)
	c, _ := rep.Check("property.apply-idempotent")
	if c.Result != Fail || !hasCode(c.Findings, CodeApplyNotIdempotent) {
		t.Fatalf("property.apply-idempotent over a state machine without dedup: %s %v, want FAIL with %s", c.Result, c.Findings, CodeApplyNotIdempotent)
	}
}

// TestApplyIdempotentNeedsAStateMachine: without Options.OpenState the
// check is NOT RUN, never PASS.
func TestApplyIdempotentNeedsAStateMachine(t *testing.T) {
	opts := jobsOptions(t, TierProperty)
	opts.Cases = 100
	opts.OpenState = nil
	opts.checks = []string{"property.apply-idempotent"}
	c, _ := mustRun(t, opts).Check("property.apply-idempotent")
	if c.Result != NotRun || !strings.Contains(c.Reason, "OpenState") {
		t.Fatalf("property.apply-idempotent without a state machine: %s %q, want NOT RUN naming Options.OpenState", c.Result, c.Reason)
	}
}
