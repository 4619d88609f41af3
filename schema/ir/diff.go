package ir

import (
	"fmt"
	"math/big"
	"slices"
	"sort"
	"strings"
)

// Compatibility finding codes (Diff).
const (
	CodeCompatTypeRemoved       = "WRIT_COMPAT_TYPE_REMOVED"
	CodeCompatTypeAdded         = "WRIT_COMPAT_TYPE_ADDED"
	CodeCompatNumberChanged     = "WRIT_COMPAT_NUMBER_CHANGED"
	CodeCompatNumberReused      = "WRIT_COMPAT_NUMBER_REUSED"
	CodeCompatClassChanged      = "WRIT_COMPAT_CLASS_CHANGED"
	CodeCompatRoutingChanged    = "WRIT_COMPAT_ROUTING_CHANGED"
	CodeCompatEncodingChanged   = "WRIT_COMPAT_ENCODING_CHANGED"
	CodeCompatConstraintChanged = "WRIT_COMPAT_CONSTRAINT_CHANGED"
	CodeCompatMachineRemoved    = "WRIT_COMPAT_MACHINE_REMOVED"
	CodeCompatMachineAdded      = "WRIT_COMPAT_MACHINE_ADDED"
	CodeCompatStateRemoved      = "WRIT_COMPAT_STATE_REMOVED"
	CodeCompatStateAdded        = "WRIT_COMPAT_STATE_ADDED"
	CodeCompatGuardChanged      = "WRIT_COMPAT_GUARD_CHANGED"
)

// Diff reports what changed from old to new and whether a rolling upgrade
// (nodes of both schemas in one cluster, sharing one log) can survive it:
// BLOCKED changes break decoding or meaning of entries already in the log;
// REVIEW_REQUIRED changes are safe only if the new types, states or values
// are not used until every node runs the new schema. Identical schemas give
// no findings.
func Diff(old, new *Schema) []Finding {
	var out []Finding
	add := func(code string, st Status, pos Pos, subj, fix, format string, args ...any) {
		out = append(out, Finding{Code: code, Status: st, Pos: pos, Subject: subj, Msg: fmt.Sprintf(format, args...), Fix: fix})
	}
	oldByNum := map[uint32]*Entry{}
	for _, e := range old.Entries {
		oldByNum[e.Number] = e
	}
	for _, oe := range old.Entries {
		ne, ok := new.Entry(oe.Name)
		subj := "entries." + oe.Name
		if !ok {
			add(CodeCompatTypeRemoved, StatusBlocked, oe.Pos, subj,
				"keep the type (mark it deprecated in doc) until no log or node can still carry it",
				"entry type %q (number %d) was removed; entries of it already in the log or proposed by old nodes can no longer be decoded", oe.Name, oe.Number)
			continue
		}
		if ne.Number != oe.Number {
			add(CodeCompatNumberChanged, StatusBlocked, ne.Pos, subj, fmt.Sprintf("restore type_number: %d", oe.Number),
				"entry type %q changed its type number %d → %d", oe.Name, oe.Number, ne.Number)
		}
		if ne.Class != oe.Class {
			add(CodeCompatClassChanged, StatusBlocked, ne.Pos, subj, "declare a new entry type with the new class instead",
				"entry type %q changed class %s → %s; old and new nodes would barrier and reply differently", oe.Name, oe.Class, ne.Class)
		}
		if r := routingDiff(oe, ne); r != "" {
			add(CodeCompatRoutingChanged, StatusBlocked, ne.Pos, subj, "declare a new entry type instead of changing routing",
				"entry type %q changed %s; old and new nodes would guard or address it differently", oe.Name, r)
		}
		if shape(oe.Fields) != shape(ne.Fields) {
			add(CodeCompatEncodingChanged, StatusBlocked, ne.Pos, subj, "declare a new entry type with the new payload instead",
				"entry type %q changed its payload layout (fields, order, kinds or optionality); the binary encoding differs", oe.Name)
		} else {
			constraintDiff(oe.Name, "", oe.Fields, ne.Fields, func(f *Field, msg string) {
				add(CodeCompatConstraintChanged, StatusReviewRequired, f.Pos, subj,
					"make sure no node sends values only the new schema accepts until every node is upgraded, and that no retained fact violates the new rule",
					"entry type %q: %s", oe.Name, msg)
			})
		}
	}
	for _, ne := range new.Entries {
		if _, ok := old.Entry(ne.Name); ok {
			continue
		}
		subj := "entries." + ne.Name
		if prev, used := oldByNum[ne.Number]; used {
			add(CodeCompatNumberReused, StatusBlocked, ne.Pos, subj, "give the new type an unused type_number",
				"new entry type %q reuses type number %d of %q", ne.Name, ne.Number, prev.Name)
			continue
		}
		add(CodeCompatTypeAdded, StatusReviewRequired, ne.Pos, subj, "do not submit it until every node runs the new schema",
			"entry type %q (number %d) is new; old nodes cannot decode it", ne.Name, ne.Number)
	}
	for _, om := range old.Machines {
		nm, ok := new.Machine(om.Name)
		subj := "machines." + om.Name
		if !ok {
			add(CodeCompatMachineRemoved, StatusBlocked, om.Pos, subj, "keep the machine while instances of it exist",
				"machine %q was removed; its stored instances lose their guards", om.Name)
			continue
		}
		if nm.Key != om.Key {
			add(CodeCompatRoutingChanged, StatusBlocked, nm.Pos, subj, "restore key: "+om.Key,
				"machine %q changed its key field %q → %q", om.Name, om.Key, nm.Key)
		}
		for _, st := range om.States {
			if !nm.HasState(st) {
				add(CodeCompatStateRemoved, StatusBlocked, nm.Pos, subj, "keep the state while instances may be in it",
					"machine %q: state %s was removed; stored instances in it become unguardable", om.Name, st)
			}
		}
		for _, st := range nm.States {
			if !om.HasState(st) {
				add(CodeCompatStateAdded, StatusReviewRequired, nm.Pos, subj, "do not move instances into it until every node is upgraded",
					"machine %q: state %s is new; old nodes' guards do not know it", om.Name, st)
			}
		}
		if g := guardDiff(om, nm); g != "" {
			add(CodeCompatGuardChanged, StatusReviewRequired, nm.Pos, subj,
				"during the upgrade old and new nodes decide these transitions differently; roll out before relying on the change",
				"machine %q: %s", om.Name, g)
		}
	}
	for _, nm := range new.Machines {
		if _, ok := old.Machine(nm.Name); !ok {
			add(CodeCompatMachineAdded, StatusReviewRequired, nm.Pos, "machines."+nm.Name, "drive it only with entry types that are new as well",
				"machine %q is new", nm.Name)
		}
	}
	SortFindings(out)
	return out
}

func routingDiff(a, b *Entry) string {
	var parts []string
	cmp := func(name, x, y string) {
		if x != y {
			parts = append(parts, fmt.Sprintf("%s %q → %q", name, x, y))
		}
	}
	cmp("machine", a.Machine, b.Machine)
	cmp("to", a.To, b.To)
	cmp("to.state", a.ToState, b.ToState)
	cmp("order", a.Order, b.Order)
	cmp("order_scope", a.OrderScope, b.OrderScope)
	cmp("id", a.ID, b.ID)
	cmp("items.type", a.Item, b.Item)
	cmp("items.field", a.ItemsField, b.ItemsField)
	cmp("keys", strings.Join(a.Keys, " "), strings.Join(b.Keys, " "))
	if fmt.Sprint(sortedMap(a.ToMap)) != fmt.Sprint(sortedMap(b.ToMap)) {
		parts = append(parts, fmt.Sprintf("to.map %v → %v", sortedMap(a.ToMap), sortedMap(b.ToMap)))
	}
	return strings.Join(parts, ", ")
}

func sortedMap(m map[string]string) []string {
	var out []string
	for k, v := range m {
		out = append(out, k+":"+v)
	}
	sort.Strings(out)
	return out
}

// shape is the part of a field list that decides the binary encoding.
func shape(fs []*Field) string {
	var b strings.Builder
	for _, f := range fs {
		fmt.Fprintf(&b, "%s:%s:%v:%s", f.Name, f.Kind, f.Optional, f.ItemType)
		if f.Elem != nil {
			b.WriteString("[" + shape([]*Field{f.Elem}) + "]")
		}
		if f.Fields != nil {
			b.WriteString("{" + shape(f.Fields) + "}")
		}
		b.WriteString(";")
	}
	return b.String()
}

func constraintDiff(typ, prefix string, a, b []*Field, report func(*Field, string)) {
	for i := range a {
		fa, fb := a[i], b[i]
		path := fa.Name
		if prefix != "" {
			path = prefix + "." + fa.Name
		}
		if !slices.Equal(fa.Enum, fb.Enum) {
			report(fb, fmt.Sprintf("field %s: allowed values %v → %v (%s)", path, fa.Enum, fb.Enum, enumDirection(fa.Enum, fb.Enum)))
		}
		if !slices.Equal(fa.Patterns, fb.Patterns) {
			report(fb, fmt.Sprintf("field %s: patterns %q → %q", path, fa.Patterns, fb.Patterns))
		}
		if d := lenDiff(fa.MinLen, fb.MinLen, true); d != "" {
			report(fb, fmt.Sprintf("field %s: minimum length %s", path, d))
		}
		if d := lenDiff(fa.MaxLen, fb.MaxLen, false); d != "" {
			report(fb, fmt.Sprintf("field %s: maximum length %s", path, d))
		}
		if d := boundDiff(fa.Min, fb.Min, true); d != "" {
			report(fb, fmt.Sprintf("field %s: lower bound %s", path, d))
		}
		if d := boundDiff(fa.Max, fb.Max, false); d != "" {
			report(fb, fmt.Sprintf("field %s: upper bound %s", path, d))
		}
		if fa.Elem != nil && fb.Elem != nil {
			constraintDiff(typ, path+"[]", []*Field{fa.Elem}, []*Field{fb.Elem}, report)
		}
		if fa.Fields != nil {
			constraintDiff(typ, path, fa.Fields, fb.Fields, report)
		}
	}
}

func enumDirection(a, b []string) string {
	sub := func(x, y []string) bool {
		for _, v := range x {
			if !slices.Contains(y, v) {
				return false
			}
		}
		return true
	}
	switch {
	case a == nil:
		return "tightened"
	case b == nil:
		return "loosened"
	case sub(b, a):
		return "tightened"
	case sub(a, b):
		return "loosened"
	}
	return "changed"
}

func lenDiff(a, b *int, lower bool) string {
	if (a == nil) == (b == nil) && (a == nil || *a == *b) {
		return ""
	}
	return limitChange(showLen(a), showLen(b), a == nil, b == nil, func() (bool, bool) {
		if lower {
			return *b > *a, true
		}
		return *b < *a, true
	})
}

func showLen(p *int) string {
	if p == nil {
		return "none"
	}
	return fmt.Sprint(*p)
}

func boundDiff(a, b *Bound, lower bool) string {
	if (a == nil) == (b == nil) && (a == nil || *a == *b) {
		return ""
	}
	return limitChange(showBound(a), showBound(b), a == nil, b == nil, func() (bool, bool) {
		ra, oka := new(big.Rat).SetString(a.Value)
		rb, okb := new(big.Rat).SetString(b.Value)
		if !oka || !okb {
			return false, false
		}
		c := rb.Cmp(ra)
		if !lower {
			c = -c
		}
		return c > 0 || (c == 0 && b.Exclusive && !a.Exclusive), true
	})
}

func showBound(x *Bound) string {
	if x == nil {
		return "none"
	}
	if x.Exclusive {
		return "exclusive " + x.Value
	}
	return x.Value
}

// limitChange describes one end of a range that changed, from and to as
// shown: a limit added tightens, a limit removed loosens, and between two
// limits tighter decides (comparable false: the change has no direction).
func limitChange(from, to string, added, removed bool, tighter func() (tight, comparable bool)) string {
	tight := added
	if !added && !removed {
		t, ok := tighter()
		if !ok {
			return fmt.Sprintf("%s → %s (changed)", from, to)
		}
		tight = t
	}
	return fmt.Sprintf("%s → %s (%s)", from, to, direction(tight))
}

func direction(tight bool) string {
	if tight {
		return "tightened"
	}
	return "loosened"
}

func guardDiff(a, b *Machine) string {
	var added, removed []string
	for _, from := range b.States {
		for _, to := range b.Transitions[from] {
			if !a.Allowed(from, to) {
				added = append(added, from+"→"+to)
			}
		}
	}
	for _, from := range a.States {
		for _, to := range a.Transitions[from] {
			if !b.Allowed(from, to) {
				removed = append(removed, from+"→"+to)
			}
		}
	}
	var parts []string
	if len(added) > 0 {
		parts = append(parts, "transitions added "+strings.Join(added, ", "))
	}
	if len(removed) > 0 {
		parts = append(parts, "transitions removed "+strings.Join(removed, ", "))
	}
	if !slices.Equal(a.Initial, b.Initial) {
		parts = append(parts, fmt.Sprintf("initial %v → %v", a.Initial, b.Initial))
	}
	if !slices.Equal(a.Terminal, b.Terminal) {
		parts = append(parts, fmt.Sprintf("terminal %v → %v", a.Terminal, b.Terminal))
	}
	return strings.Join(parts, "; ")
}
