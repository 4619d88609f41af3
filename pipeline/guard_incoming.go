package pipeline

import (
	"encoding/json"
	"strings"

	"github.com/writ-dev/writ/kv"
	"github.com/writ-dev/writ/schema/ir"
)

// incomingOf is what e says about its machine instance: the target state,
// its order and, when the entry type declares order_scope, the order
// epoch it opens or belongs to.
func incomingOf(e *entry) Incoming {
	in := Incoming{To: e.payload.TargetState()}
	in.Order, in.HasOrder = e.payload.Order()
	if e.desc == nil || e.desc.Entry == nil || e.desc.Entry.OrderScope == "" {
		return in
	}
	if in.Scope, in.HasScope = orderScopeOf(e.payload, e.json, e.desc.Entry.OrderScope); in.HasScope {
		in.Opens = e.desc.Entry.OpensEpoch()
	}
	return in
}

// orderScopeOf is the value of the payload's order_scope field: from the
// payload when it implements ir.OrderScoper (generated payloads do), else
// read from its JSON encoding (strings unquoted, numbers as written).
func orderScopeOf(p ir.Payload, data []byte, field string) (string, bool) {
	if s, ok := p.(ir.OrderScoper); ok {
		return s.OrderScope(), true
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(data, &obj); err != nil {
		return "", false
	}
	raw, ok := obj[field]
	if !ok {
		return "", false
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, true
	}
	return strings.TrimSpace(string(raw)), true
}

// newGuardTransition is the transition of instance inst of machine m by
// in, decided v against cur (read at revision rev).
func newGuardTransition(machine, inst string, rev uint64, cur MachineRecord, exists bool, in Incoming, v Verdict) guardTransition {
	t := guardTransition{Machine: machine, Instance: inst, ExpectRev: rev, To: in.To,
		Order: in.Order, HasOrder: in.HasOrder, Scope: in.Scope, HasScope: in.HasScope, Opens: in.Opens, Verdict: v}
	if exists {
		t.From, t.FromOrder, t.FromHas = cur.State, cur.Order, cur.HasOrder
		t.FromScope, t.FromScopeHas = cur.Scope, cur.HasScope
	}
	return t
}

// recordWrite is the write of the machine record a non-applying verdict
// still changes (a duplicate with a newer order); ok=false when it changes
// nothing.
func recordWrite(t *guardTransition) (kv.Write, bool) {
	if t.Verdict == VerdictApply {
		return kv.Write{}, false // written with the handler's effect
	}
	next, changed := NextRecord(t.from(), t.From != "", t.incoming(), t.Verdict)
	if !changed {
		return kv.Write{}, false
	}
	return kv.Write{Key: MachineKey(t.Machine, t.Instance), Value: next.AppendJSON(nil), IfRev: t.ExpectRev}, true
}
