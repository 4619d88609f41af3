package pipeline

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/writ-dev/writ/kv"
	"github.com/writ-dev/writ/schema/ir"
)

// errGuardMovedText marks a veto caused by state that moved between
// evaluation and apply; the proposer re-evaluates such commands. Such a
// veto is a guardMoved error (kv.ErrMoved): raftstore records it as a
// conflict. The text still marks records a version before that wrote as
// rejections.
const errGuardMovedText = "pipeline: guard moved"

// guardMoved is the apply-time guard's refusal of a command evaluated
// against a machine record that has moved since: it matches kv.ErrMoved.
type guardMoved struct{ msg string }

func (e guardMoved) Error() string        { return e.msg }
func (e guardMoved) Is(target error) bool { return target == kv.ErrMoved }

// Checker is the apply-time guard (W8): raftstore calls Check for every
// command on every replica, before applying its effect. It reads only the
// command and committed state, so every replica decides the same.
type Checker struct {
	cat ir.Catalog
	// machines caches the catalog's answers to Machine by name (copy on
	// write), so a check looks a machine up without building a string.
	machines atomic.Pointer[[]namedMachine]
}

type namedMachine struct {
	name string
	m    *ir.Machine
}

var _ kv.Checker = (*Checker)(nil)

// NewChecker returns the apply-time guard for a catalog.
func NewChecker(cat ir.Catalog) *Checker { return &Checker{cat: cat} }

// machine is cat.Machine for a name still in the encoded guard.
func (c *Checker) machine(name []byte) (*ir.Machine, bool) {
	if ms := c.machines.Load(); ms != nil {
		for _, nm := range *ms {
			if nm.name == string(name) {
				return nm.m, true
			}
		}
	}
	n := string(name)
	m, ok := c.cat.Machine(n)
	if !ok {
		return nil, false
	}
	for {
		old := c.machines.Load()
		var next []namedMachine
		if old != nil {
			if len(*old) >= 256 {
				return m, true // a catalog this large is not cached further
			}
			next = append(next, *old...)
		}
		next = append(next, namedMachine{name: n, m: m})
		if c.machines.CompareAndSwap(old, &next) {
			return m, true
		}
	}
}

// machineKeyOf returns MachineKey(m.Name, instance), reusing the string of
// a write in the effect or the command's key when one matches.
func machineKeyOf(cmd *kv.Command, m *ir.Machine, instance []byte) string {
	for i := range cmd.Effect.Writes {
		k := cmd.Effect.Writes[i].Key
		if len(k) == len(MachinePrefix)+len(m.Name)+1+len(instance) && k[:len(MachinePrefix)] == MachinePrefix &&
			k[len(MachinePrefix):len(MachinePrefix)+len(m.Name)] == m.Name && k[len(MachinePrefix)+len(m.Name)] == '/' &&
			k[len(MachinePrefix)+len(m.Name)+1:] == string(instance) {
			return k
		}
	}
	return MachineKey(m.Name, string(instance))
}

// Check re-runs the guard of every transition the command carries against
// the replica's committed state, and checks that the effect writes exactly
// the machine records the verdicts allow. It returns an error (a veto) when
// they disagree.
func (c *Checker) Check(cmd *kv.Command, state kv.Reader) error {
	var tbuf [2]rawTransition
	g, err := decodeGuardRaw(cmd.Guard, tbuf[:0])
	if err != nil {
		return err
	}
	if Verdict(cmd.Verdict) == VerdictReject {
		if len(cmd.Effect.Writes) != 0 {
			return errors.New("pipeline: guard: a recorded rejection must not write")
		}
		return nil
	}
	illegal := illegalVerdict(ir.Class(cmd.Class))
	var keyBuf [4]string
	keys := keyBuf[:0]
	var writesBuf [4]bool
	writes := writesBuf[:0] // writes[i]: transition i writes its record
	for i := range g.transitions {
		key, write, err := c.checkTransition(cmd, &g.transitions[i], state, illegal)
		if err != nil {
			return err
		}
		keys = append(keys, key)
		writes = append(writes, write)
	}
	return checkMachineWrites(cmd, keys, writes)
}

// checkTransition re-decides one carried transition against the replica's
// state: its machine record key, whether the transition writes its record,
// and why the command must be vetoed (nil: it agrees).
func (c *Checker) checkTransition(cmd *kv.Command, t *rawTransition, state kv.Reader, illegal Verdict) (key string, write bool, err error) {
	m, ok := c.machine(t.machine)
	if !ok {
		return "", false, fmt.Errorf("pipeline: guard: unknown machine %q (schema skew between replicas?)", t.machine)
	}
	key = machineKeyOf(cmd, m, t.instance)
	rec, exists := state.Get(key)
	var cur MachineRecord
	if exists {
		if cur, err = parseMachineRecord(rec.Value, m); err != nil {
			return key, false, fmt.Errorf("pipeline: guard: %s: %w", key, err)
		}
	}
	to := internState(m, t.to)
	in := t.incoming(to)
	v, _ := decide(m, cur, exists, in, illegal, false)
	if t.verdict == VerdictOverride {
		// An operator's audited override (conflict resolve with
		// apply-incoming): only that command may carry it, only to a
		// declared state, and only on the record it was decided on.
		if cmd.Type != typeConflictResolve {
			return key, false, fmt.Errorf("pipeline: guard: %s: verdict override on a %s command (only %s may override the guard)", key, cmd.Type, typeConflictResolve)
		}
		if !m.HasState(to) {
			return key, false, fmt.Errorf("pipeline: guard: %s: override to undeclared state %q", key, t.to)
		}
		if rec.Rev != t.expectRev {
			return key, false, guardMoved{fmt.Sprintf("%s: %s moved (rev %d, resolved at %d): the override is decided again", errGuardMovedText, key, rec.Rev, t.expectRev)}
		}
		v = VerdictOverride
	}
	if rec.Rev != t.expectRev {
		if v != t.verdict {
			return key, false, guardMoved{fmt.Sprintf("%s: %s moved (rev %d, evaluated at %d): verdict now %s, was %s", errGuardMovedText, key, rec.Rev, t.expectRev, v, t.verdict)}
		}
	} else if v != t.verdict {
		return key, false, fmt.Errorf("pipeline: guard: %s: verdict %s at apply, %s at evaluation", key, v, t.verdict)
	}
	// The record the transition writes follows from what evaluation
	// saw (the write's revision precondition fails if it moved).
	from, fromExists := t.fromRecord(internState(m, t.from))
	next, write := NextRecord(from, fromExists, in, t.verdict)
	if !write {
		return key, false, nil
	}
	var buf [96]byte
	want := next.AppendJSON(buf[:0])
	found := false
	for _, w := range cmd.Effect.Writes {
		if w.Key != key {
			continue
		}
		if found || w.Delete || w.Unconditional || !bytes.Equal(want, w.Value) {
			return key, false, fmt.Errorf("pipeline: guard: effect write of %s does not match its transition", key)
		}
		found = true
	}
	if !found {
		return key, false, fmt.Errorf("pipeline: guard: %s transition of %s has no write of its record", t.verdict, key)
	}
	return key, true, nil
}

// checkMachineWrites refuses a write of a machine record that no carried
// transition accounts for: writes[i] says whether the transition at keys[i]
// writes its record.
func checkMachineWrites(cmd *kv.Command, keys []string, writes []bool) error {
	for _, w := range cmd.Effect.Writes {
		if !strings.HasPrefix(w.Key, MachinePrefix) {
			continue
		}
		ok := false
		for i, k := range keys {
			if k == w.Key && writes[i] {
				ok = true
			}
		}
		if !ok {
			return fmt.Errorf("pipeline: guard: effect writes %s without a transition that changes it", w.Key)
		}
	}
	return nil
}
