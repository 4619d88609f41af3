package pipeline

import (
	"context"
	"fmt"
	"strings"

	"github.com/writ-dev/writ/kv"
	"github.com/writ-dev/writ/schema/ir"
)

// ResolveRequest asks to close one conflict case.
type ResolveRequest struct {
	// Key is the case's key, _conflict/<machine>/<instance> (the prefix may
	// be left out).
	Key string
	// Reason says why the case is closed; required.
	Reason string
	// By names who resolves it (the caller's identity, or "anonymous"
	// with the peer address).
	By string
	// ApplyIncoming also applies the case's retained incoming fact: the
	// instance moves to the fact's state (with its order and epoch) in the
	// same command that closes the case, overriding the guard, audited in
	// the case's Resolution.Applied and on watch (verdict override).
	ApplyIncoming bool
}

// ParseConflictKey splits a conflict case key (with or without the
// _conflict/ prefix) into machine and instance.
func ParseConflictKey(key string) (machine, instance string, err error) {
	k := strings.TrimPrefix(key, ConflictPrefix)
	machine, instance, ok := strings.Cut(k, "/")
	if !ok || machine == "" || instance == "" {
		return "", "", fmt.Errorf("pipeline: conflict key %q: want %s<machine>/<instance>, e.g. %sjob/j1 (see writctl conflicts list)", key, ConflictPrefix, ConflictPrefix)
	}
	return machine, instance, nil
}

// ResolveConflictAs closes a conflict case through the log, as a
// request-class command, recording r as the case's Resolution. Outcomes are
// those of ResolveConflict; the closing command is on the watch stream
// (type writ.conflict.resolve, key the case's key).
func (p *Pipeline) ResolveConflictAs(ctx context.Context, r ResolveRequest) Outcome {
	machine, instance, err := ParseConflictKey(r.Key)
	if err != nil {
		return reject(typeConflictResolve, "key", "format", err.Error())
	}
	if strings.TrimSpace(r.Reason) == "" {
		return reject(typeConflictResolve, "reason", "required", "reason is required: say why the case is closed (--reason TEXT)")
	}
	if r.By == "" {
		r.By = "anonymous"
	}
	key := ConflictKey(machine, instance)
	keys := []string{key}
	if r.ApplyIncoming {
		keys = append(keys, MachineKey(machine, instance))
	}
	now := p.clock.Now()
	p.mu.Lock()
	if p.stopped {
		p.mu.Unlock()
		return Outcome{ID: key, Type: typeConflictResolve, Status: StatusUnavailable, Reason: ErrStopped.Error()}
	}
	e := &entry{kind: kindRequest, class: ir.ClassRequest, typ: typeConflictResolve, cmdID: "resolve:" + key, userID: key,
		inst: key, keys: keys, x: &entryExtra{resolve: key, note: r.Reason, resolution: &Resolution{By: r.By, Reason: r.Reason, ApplyIncoming: r.ApplyIncoming}},
		deadline: p.deadlineAt(now.Add(p.cfg.CommitTimeout))}
	if cur := p.live[e.cmdID]; cur != nil && !cur.replied {
		p.mu.Unlock()
		return p.wait(ctx, &Handle{e: cur, p: p})
	}
	p.enqueueLocked(e, false)
	p.wakeup()
	e.h = Handle{e: e, p: p}
	p.mu.Unlock()
	return p.wait(ctx, &e.h)
}

// applyIncomingPlan decides the transition a resolve with apply-incoming
// forces: the case's retained incoming fact, decoded and checked by the
// catalog as at ingress, moves the instance from its current record (read
// under the resolve's latch) to the fact's state. why is non-empty when the
// fact cannot be applied (nothing retained, undecodable, another machine).
func (p *Pipeline) applyIncomingPlan(e *entry, c *ConflictCase) (t guardTransition, w kv.Write, why string) {
	if len(c.Payload) == 0 {
		return t, w, fmt.Sprintf("the case %s retains no incoming payload to apply; resolve it without --apply-incoming and report the fact again", e.x.resolve)
	}
	ps, rej := p.validate(Entry{Type: c.Type, Payload: c.Payload, Format: FormatJSON})
	if rej != nil {
		return t, w, fmt.Sprintf("the retained incoming %s no longer validates: %s", c.Type, rej.Reason)
	}
	fe := &entry{desc: ps.desc, payload: ps.payload, json: ps.json, class: ps.class}
	m := ps.desc.Machine
	if m == nil || m.Name != c.Machine || ps.payload.InstanceKey() != c.Instance || ps.payload.TargetState() == "" {
		return t, w, fmt.Sprintf("the retained incoming %s does not move %s/%s to a state; resolve without --apply-incoming", c.Type, c.Machine, c.Instance)
	}
	in := incomingOf(fe)
	if !m.HasState(in.To) {
		return t, w, fmt.Sprintf("%s: %q is not a declared state (declared: %s)", m.Name, in.To, strings.Join(m.States, ", "))
	}
	mkey := MachineKey(c.Machine, c.Instance)
	rec, _ := e.stateOf(mkey)
	var cur MachineRecord
	exists := rec.Rev != 0
	if exists {
		var err error
		if cur, err = parseMachineRecord(rec.Value, m); err != nil {
			return t, w, fmt.Sprintf("%s: %v", mkey, err)
		}
	}
	t = newGuardTransition(m.Name, c.Instance, rec.Rev, cur, exists, in, VerdictOverride)
	next, _ := NextRecord(cur, exists, in, VerdictOverride)
	return t, kv.Write{Key: mkey, Value: next.AppendJSON(nil), IfRev: rec.Rev}, ""
}

func appliedOf(c *ConflictCase, t guardTransition) *AppliedIncoming {
	from := t.From
	if from == "" {
		from = "(none)"
	}
	return &AppliedIncoming{EntryID: c.EntryID, Type: c.Type, From: from, To: t.To, Verdict: VerdictOverride.String()}
}
