package ir

import (
	"fmt"
	"strings"
)

// checkOrderScopes reports order_scope declarations the guard cannot
// honour, or that leave a machine's ordering inconsistent: every entry
// type that orders an instance's state within an epoch must agree with
// the others on it, and something must open the epochs.
func (s *Schema) checkOrderScopes() []Finding {
	var out []Finding
	for _, e := range s.Entries {
		if e.OrderScope == "" {
			continue
		}
		subj := "entries." + e.Name
		f, ok := e.Field(e.OrderScope)
		switch {
		case !ok:
			out = append(out, Finding{Code: CodeUnknownField, Status: StatusBlocked, Pos: e.Pos, Subject: subj,
				Msg: fmt.Sprintf("entry type %q: order_scope names field %q, which the payload does not declare", e.Name, e.OrderScope),
				Fix: fmt.Sprintf("declare payload.%s or fix order_scope", e.OrderScope)})
		case f.Kind != KindString && f.Kind != KindInt && f.Kind != KindUint:
			out = append(out, Finding{Code: CodeBadFieldType, Status: StatusBlocked, Pos: f.Pos, Subject: subj,
				Msg: fmt.Sprintf("entry type %q: order_scope field %q is a %s", e.Name, f.Name, f.Kind),
				Fix: fmt.Sprintf("make payload.%s a string or an integer", f.Name)})
		case f.Optional:
			out = append(out, Finding{Code: CodeBadFieldType, Status: StatusBlocked, Pos: f.Pos, Subject: subj,
				Msg: fmt.Sprintf("entry type %q: order_scope field %q is optional", e.Name, f.Name),
				Fix: fmt.Sprintf("make payload.%s required", f.Name)})
		}
		if e.Machine == "" || !e.hasTarget() {
			out = append(out, Finding{Code: CodeOrderScopeUnused, Status: StatusBlocked, Pos: e.Pos, Subject: subj,
				Msg: fmt.Sprintf("entry type %q declares order_scope but moves no machine instance (no machine or no to), so the guard never reads it", e.Name),
				Fix: "remove order_scope, or give the entry type a machine and a to"})
		}
	}
	for _, m := range s.Machines {
		out = append(out, s.checkMachineScopes(m)...)
	}
	return out
}

func (e *Entry) hasTarget() bool { return e.To != "" || e.ToState != "" }

// checkMachineScopes checks one machine: the entry types whose order the
// guard compares (order and a target) either all order within epochs or
// none does, and epochs have an opener.
func (s *Schema) checkMachineScopes(m *Machine) []Finding {
	var scoped, unscoped, openers []string
	for _, e := range s.Entries {
		if e.Machine != m.Name || !e.hasTarget() {
			continue
		}
		switch {
		case e.OpensEpoch():
			openers = append(openers, e.Name)
		case e.Order != "" && e.OrderScope != "":
			scoped = append(scoped, e.Name)
		case e.Order != "":
			unscoped = append(unscoped, e.Name)
		}
	}
	var out []Finding
	subj := "machines." + m.Name
	list := func(names []string) string { return strings.Join(names, ", ") }
	if len(scoped) > 0 && len(unscoped) > 0 {
		out = append(out, Finding{Code: CodeOrderScopeMixed, Status: StatusBlocked, Pos: m.Pos, Subject: subj,
			Msg: fmt.Sprintf("machine %q: %s order within an epoch (order_scope) but %s do not, so their orders are compared across epochs", m.Name, list(scoped), list(unscoped)),
			Fix: fmt.Sprintf("declare order_scope on %s too, or remove it from %s", list(unscoped), list(scoped))})
	}
	if len(openers) > 0 && len(scoped) == 0 && len(unscoped) > 0 {
		out = append(out, Finding{Code: CodeOrderScopeMixed, Status: StatusReviewRequired, Pos: m.Pos, Subject: subj,
			Msg: fmt.Sprintf("machine %q: %s open order epochs but the ordered entry types %s name none, so a late report from an earlier epoch is ordered against the new one", m.Name, list(openers), list(unscoped)),
			Fix: fmt.Sprintf("declare order_scope on %s naming the field that identifies the epoch", list(unscoped))})
	}
	if len(scoped) > 0 && len(openers) == 0 {
		out = append(out, Finding{Code: CodeNoEpochOpener, Status: StatusIncomplete, Pos: m.Pos, Subject: subj,
			Msg: fmt.Sprintf("machine %q: %s order within epochs but no entry type opens one, so an instance's first report claims its epoch for good", m.Name, list(scoped)),
			Fix: fmt.Sprintf("declare order_scope (without order) on the entry type that starts a new attempt of a %s, e.g. its assignment", m.Name)})
	}
	return out
}
