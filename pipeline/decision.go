package pipeline

import (
	"context"
	"fmt"
)

// One decision per entry. The guard says whether the entry's own transition
// is legal; the handler says what the entry does to the domain. They decide
// together, once: an entry applies its own transition only in the command
// that also carries the handler's effect. When the handler refuses the entry
// (a rule or validation error) or ignores it (answers with nothing: no
// writes, no transitions, no result), the entry's own transition is not
// applied either:
//
//   - a request is REJECTED with the handler's reason (confirmed against
//     current state first, as every rejection is);
//   - a fact is quarantined: a conflict case is opened on its machine
//     instance, the state is preserved, and the fact is retained in the log
//     (W8). A fact that names no machine instance is recorded as rejected.
//
// At apply, the checker accepts a machine record write only for a
// transition the command carries as applying, and a quarantined or rejected
// command carries none, so no replica can apply the transition the proposer
// left out.

// handlerIgnored reports whether the handler answered an entry with nothing
// at all, so that the entry's own transition would be the only change.
func handlerIgnored(r *EvalResult) bool {
	return len(r.Effect.Writes) == 0 && len(r.Transitions) == 0 && len(r.Result) == 0 && len(r.NeedKeys) == 0
}

// declinedPlan handles an entry the handler refused or ignored (reason says
// which and why): nothing of it applies.
func (p *Pipeline) declinedPlan(ctx context.Context, log Log, e *entry, own *guardTransition, reason string) {
	if e.kind != kindFact {
		p.rejectConfirmed(ctx, log, e, reason)
		return
	}
	t, ok := p.declinedTransition(e, own)
	if !ok {
		// No machine instance to open a case on: the log still retains
		// the fact, as a recorded rejection.
		*e.cmd = p.baseCmd(e, VerdictReject, guardInfo{Reason: reason})
		e.plan = planPropose
		p.traceLocked("evaluate", e, 0, "handler declined fact: "+reason)
		return
	}
	p.traceLocked("evaluate", e, 0, "handler declined fact, quarantined: "+reason)
	p.quarantineWith(ctx, log, e, t, reason, nil)
}

// declinedTransition is the instance and the states a declined fact's
// conflict case names: its own transition, or for a fact that only orders
// its machine, the instance's current state.
func (p *Pipeline) declinedTransition(e *entry, own *guardTransition) (guardTransition, bool) {
	if own != nil {
		return *own, true
	}
	if e.machine == nil || e.inst == "" {
		return guardTransition{}, false
	}
	t := guardTransition{Machine: e.machine.Name, Instance: e.inst, To: "(unchanged)"}
	if cur, exists, _, err := p.machineState(e); err == nil && exists {
		t.From = cur.State
	}
	return t, true
}

func ignoredReason(own *guardTransition) string {
	if own == nil {
		return "the handler changed nothing"
	}
	from := own.From
	if from == "" {
		from = "(absent)"
	}
	return fmt.Sprintf("the handler changed nothing, so %s %s stays %s (not moved to %s)", own.Machine, own.Instance, from, own.To)
}
