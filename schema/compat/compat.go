package compat

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/writ-dev/writ/schema/ir"
)

// Diff is ir.Diff: every change from old to new that matters to a rolling
// upgrade, BLOCKED or REVIEW_REQUIRED.
func Diff(old, new *ir.Schema) []ir.Finding { return ir.Diff(old, new) }

// Blocked returns the BLOCKED findings of fs, in order.
func Blocked(fs []ir.Finding) []ir.Finding {
	var out []ir.Finding
	for _, f := range fs {
		if f.Fails() {
			out = append(out, f)
		}
	}
	return out
}

// Error is a candidate schema refused by Check: the BLOCKED findings of
// the diff from the active schema to the candidate.
type Error struct {
	Findings []ir.Finding
}

// Error is one line: the first finding's code, message and fix, and how
// many more there are.
func (e *Error) Error() string {
	f := e.Findings[0]
	s := fmt.Sprintf("%s %s: %s (fix: %s)", f.Status, f.Code, f.Msg, f.Fix)
	if n := len(e.Findings) - 1; n > 0 {
		s += fmt.Sprintf("; and %d more BLOCKED change(s): see `writ schema diff`", n)
	}
	return s
}

// Code is the first BLOCKED finding's code.
func (e *Error) Code() string { return e.Findings[0].Code }

// Check reports whether a node running candidate may join a cluster whose
// active schema is active: nil when no change from active to candidate is
// BLOCKED, else an *Error.
func Check(active, candidate *ir.Schema) error {
	if b := Blocked(Diff(active, candidate)); len(b) > 0 {
		return &Error{Findings: b}
	}
	return nil
}

// Effective is the schema a cluster whose nodes run the given schemas may
// use: the entry types declared by all of them with the same type number
// and class (taken from the first schema that declares them), and the
// machines all of them declare, with the states and transitions all of
// them know. An entry type outside it must not be written: some node could
// not decode or guard it. Effective of one schema is that schema's model;
// of none, nil.
func Effective(schemas ...*ir.Schema) *ir.Schema {
	if len(schemas) == 0 {
		return nil
	}
	first := schemas[0]
	out := &ir.Schema{Package: first.Package}
	for _, e := range first.Entries {
		all := true
		for _, s := range schemas[1:] {
			o, ok := s.Entry(e.Name)
			if !ok || o.Number != e.Number || o.Class != e.Class {
				all = false
				break
			}
		}
		if all {
			out.Entries = append(out.Entries, e)
		}
	}
	for _, m := range first.Machines {
		ms := []*ir.Machine{m}
		for _, s := range schemas[1:] {
			o, ok := s.Machine(m.Name)
			if !ok {
				ms = nil
				break
			}
			ms = append(ms, o)
		}
		if ms != nil {
			out.Machines = append(out.Machines, commonMachine(ms))
		}
	}
	return out
}

// commonMachine keeps what every version of a machine declares.
func commonMachine(ms []*ir.Machine) *ir.Machine {
	keep := func(pick func(*ir.Machine) []string) []string {
		var out []string
		for _, v := range pick(ms[0]) {
			all := true
			for _, m := range ms[1:] {
				if !slices.Contains(pick(m), v) {
					all = false
					break
				}
			}
			if all {
				out = append(out, v)
			}
		}
		return out
	}
	m0 := ms[0]
	out := &ir.Machine{Name: m0.Name, Key: m0.Key, Pos: m0.Pos,
		States:      keep(func(m *ir.Machine) []string { return m.States }),
		Initial:     keep(func(m *ir.Machine) []string { return m.Initial }),
		Terminal:    keep(func(m *ir.Machine) []string { return m.Terminal }),
		Transitions: map[string][]string{}}
	for _, from := range out.States {
		var tos []string
		for _, to := range m0.Transitions[from] {
			all := true
			for _, m := range ms[1:] {
				if !m.Allowed(from, to) {
					all = false
					break
				}
			}
			if all {
				tos = append(tos, to)
			}
		}
		if tos != nil {
			out.Transitions[from] = tos
		}
	}
	return out
}

// Declares reports whether s declares the entry type typ; for a receipt
// type its item type must be declared too.
func Declares(s *ir.Schema, typ string) bool {
	e, ok := s.Entry(typ)
	if !ok {
		return false
	}
	if e.Item != "" {
		_, ok = s.Entry(e.Item)
	}
	return ok
}

// Missing lists the entry types of s that eff does not declare, sorted.
func Missing(s, eff *ir.Schema) []string {
	var out []string
	for _, e := range s.Entries {
		if _, ok := eff.Entry(e.Name); !ok {
			out = append(out, e.Name)
		}
	}
	sort.Strings(out)
	return out
}

// Encode is a schema's model as carried between nodes (JSON of ir.Schema).
func Encode(s *ir.Schema) ([]byte, error) {
	b, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("compat: encode schema: %w", err)
	}
	return b, nil
}

// Decode parses what Encode produced and checks that it is the schema with
// fingerprint want, so a node cannot be judged on a model other than the
// one it announces.
func Decode(b []byte, want string) (*ir.Schema, error) {
	var s ir.Schema
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("compat: decode schema: %w", err)
	}
	if got := s.Fingerprint(); got != want {
		return nil, fmt.Errorf("compat: schema model has fingerprint %s, not the announced %s", short(got), short(want))
	}
	return &s, nil
}

func short(fp string) string {
	if i := strings.IndexByte(fp, ':'); i >= 0 && len(fp) > i+13 {
		return fp[:i+13]
	}
	return fp
}
