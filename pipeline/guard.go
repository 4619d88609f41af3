package pipeline

import (
	"fmt"
	"strings"

	"github.com/writ-dev/writ/schema/ir"
)

// Reserved key prefixes owned by the pipeline.
const (
	MachinePrefix  = "_m/"
	ConflictPrefix = "_conflict/"
	ConfigPrefix   = "_config/"
	// ConfigCommittedKey holds the committed configuration tag; it advances
	// only when an activation applies.
	ConfigCommittedKey = "_config/committed"
	configStagedPrefix = "_config/staged/"
)

// MachineKey is the key of a machine instance's record.
func MachineKey(machine, instance string) string {
	return MachinePrefix + machine + "/" + instance
}

// ConflictKey is the key of the conflict case for a machine instance.
func ConflictKey(machine, instance string) string {
	return ConflictPrefix + machine + "/" + instance
}

// Incoming is what an entry says about its machine instance: the target
// state, its order, and the order epoch it belongs to or opens (see
// docs/schema.md, "Order and order epochs").
type Incoming struct {
	To       string
	Order    uint64
	HasOrder bool
	// Scope is the value of the entry's order_scope field (HasScope).
	Scope    string
	HasScope bool
	// Opens: the entry type opens a new order epoch (order_scope without
	// order); when it applies, the recorded order resets and the epoch is
	// Scope.
	Opens bool
}

// Decide is the runtime guard (W8): the verdict for moving an instance whose
// current record is cur (exists=false when absent) to state to, with an
// optional order. illegal is the verdict an illegal transition gets:
// VerdictReject for requests, VerdictQuarantine for facts. It is pure, so
// evaluation and every replica's apply reach the same verdict. It is
// DecideIncoming for an entry outside any order epoch.
func Decide(m *ir.Machine, cur MachineRecord, exists bool, to string, order uint64, hasOrder bool, illegal Verdict) (Verdict, string) {
	return decide(m, cur, exists, Incoming{To: to, Order: order, HasOrder: hasOrder}, illegal, true)
}

// DecideIncoming is the runtime guard (W8) for an entry that may belong to
// or open an order epoch. The record the verdict leaves is NextRecord.
func DecideIncoming(m *ir.Machine, cur MachineRecord, exists bool, in Incoming, illegal Verdict) (Verdict, string) {
	return decide(m, cur, exists, in, illegal, true)
}

// decide is DecideIncoming; the reason is built only when why is set.
func decide(m *ir.Machine, cur MachineRecord, exists bool, in Incoming, illegal Verdict, why bool) (Verdict, string) {
	to := in.To
	if !m.HasState(to) {
		if !why {
			return illegal, ""
		}
		return illegal, fmt.Sprintf("%s: %q is not a declared state (declared: %s)", m.Name, to, strings.Join(m.States, ", "))
	}
	if !exists {
		if m.IsInitial(to) {
			return VerdictApply, ""
		}
		if !why {
			return illegal, ""
		}
		return illegal, fmt.Sprintf("%s: instance does not exist and %s is not an initial state (initial: %s)", m.Name, to, strings.Join(m.Initial, ", "))
	}
	if in.Opens {
		return decideOpen(m, cur, in, illegal, why)
	}
	if in.HasScope && cur.HasScope && in.Scope != cur.Scope {
		if !why {
			return illegal, ""
		}
		return illegal, fmt.Sprintf("%s: reported in order epoch %q, but the instance's current epoch is %q (%s); only the current epoch reports on it", m.Name, in.Scope, cur.Scope, cur.State)
	}
	if in.HasOrder && cur.HasOrder {
		if in.Order < cur.Order {
			if !why {
				return VerdictStale, ""
			}
			return VerdictStale, fmt.Sprintf("%s: order %d is older than recorded order %d", m.Name, in.Order, cur.Order)
		}
		if in.Order == cur.Order {
			if to == cur.State {
				if !why {
					return VerdictDuplicate, ""
				}
				return VerdictDuplicate, fmt.Sprintf("%s: order %d already recorded with state %s", m.Name, in.Order, to)
			}
			if !why {
				return illegal, ""
			}
			return illegal, fmt.Sprintf("%s: order %d already recorded with state %s, now %s", m.Name, in.Order, cur.State, to)
		}
	}
	if to == cur.State {
		if !why {
			return VerdictDuplicate, ""
		}
		if in.HasOrder {
			return VerdictDuplicate, fmt.Sprintf("%s: already %s; order %d recorded", m.Name, to, in.Order)
		}
		return VerdictDuplicate, fmt.Sprintf("%s: already %s", m.Name, to)
	}
	return decideStep(m, cur.State, to, illegal, why)
}

// decideOpen decides an entry that opens a new order epoch. Repeating the
// opener of the current epoch is a duplicate; opening another epoch in the
// same state needs a declared transition from the state to itself.
func decideOpen(m *ir.Machine, cur MachineRecord, in Incoming, illegal Verdict, why bool) (Verdict, string) {
	if in.To != cur.State {
		return decideStep(m, cur.State, in.To, illegal, why)
	}
	if !cur.HasScope || cur.Scope == in.Scope {
		if !why {
			return VerdictDuplicate, ""
		}
		return VerdictDuplicate, fmt.Sprintf("%s: already %s in order epoch %q", m.Name, in.To, in.Scope)
	}
	if m.Allowed(cur.State, in.To) {
		return VerdictApply, ""
	}
	if !why {
		return illegal, ""
	}
	return illegal, fmt.Sprintf("%s: already %s in order epoch %q; opening epoch %q needs a declared transition %s → %s", m.Name, cur.State, cur.Scope, in.Scope, cur.State, in.To)
}

// decideStep decides a move between two different states.
func decideStep(m *ir.Machine, from, to string, illegal Verdict, why bool) (Verdict, string) {
	if m.Allowed(from, to) {
		return VerdictApply, ""
	}
	if m.IsTerminal(from) {
		if canaryGuardTerminalExit && !m.IsTerminal(to) {
			return VerdictApply, "" // canary build: terminal → non-terminal allowed
		}
		if !why {
			return illegal, ""
		}
		return illegal, fmt.Sprintf("%s: %s is terminal; %s → %s would leave it", m.Name, from, from, to)
	}
	if !why {
		return illegal, ""
	}
	return illegal, fmt.Sprintf("%s: %s → %s is not a declared transition", m.Name, from, to)
}

// NextRecord is the machine record an instance has after an entry got
// verdict v against cur; changed=false when the record stays as it is.
// An applied transition moves to in.To; a duplicate that carries a newer
// order (or names the epoch of a record that had none) advances the
// recorded order with the state unchanged, so a later report with an
// older order is stale. An applied epoch opener resets the order and
// records its epoch. Every other verdict changes nothing.
func NextRecord(cur MachineRecord, exists bool, in Incoming, v Verdict) (next MachineRecord, changed bool) {
	switch v {
	case VerdictApply, VerdictOverride:
	case VerdictDuplicate:
		if !exists || !duplicateAdvances(cur, in) {
			return cur, false
		}
	default:
		return cur, false
	}
	return advanceRecord(cur, exists, in), true
}

// duplicateAdvances reports whether a duplicate (same state) verdict for
// in still changes the record: a newer order, or an epoch the record
// lacks. An epoch opener repeating its epoch changes nothing.
func duplicateAdvances(cur MachineRecord, in Incoming) bool {
	if canaryDupNoAdvance || in.Opens {
		return false
	}
	return (in.HasOrder && (!cur.HasOrder || in.Order > cur.Order)) || (in.HasScope && !cur.HasScope)
}

// advanceRecord is the record in leaves when it moves cur (or, for a
// duplicate, advances it): the order and epoch in carries, else cur's.
func advanceRecord(cur MachineRecord, exists bool, in Incoming) MachineRecord {
	next := MachineRecord{State: in.To}
	if in.Opens {
		next.Scope, next.HasScope = in.Scope, true
		return next
	}
	switch {
	case in.HasOrder:
		next.Order, next.HasOrder = in.Order, true
	case exists && cur.HasOrder:
		next.Order, next.HasOrder = cur.Order, true
	}
	switch {
	case in.HasScope:
		next.Scope, next.HasScope = in.Scope, true
	case exists && cur.HasScope:
		next.Scope, next.HasScope = cur.Scope, true
	}
	return next
}

func illegalVerdict(c ir.Class) Verdict {
	if c == ir.ClassRequest || c == ir.ClassConfig {
		return VerdictReject
	}
	return VerdictQuarantine
}
