package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"

	"github.com/writ-dev/writ/kv"
	"github.com/writ-dev/writ/schema/ir"
)

// The conflict case document, its observations and resolution record are
// defined in kv, so that clients (writctl) read the document pipeline
// writes without importing pipeline.
type (
	ConflictCase    = kv.ConflictCase
	Observation     = kv.Observation
	Resolution      = kv.Resolution
	AppliedIncoming = kv.AppliedIncoming
)

// MaxObservations bounds ConflictCase.Observations.
const MaxObservations = kv.MaxConflictObservations

// observed reports whether the case already records an observation by the
// entry entryID.
func observed(c *ConflictCase, entryID string) bool {
	for _, o := range c.Observations {
		if o.EntryID == entryID {
			return true
		}
	}
	return false
}

func appendObservation(prev []Observation, o Observation) []Observation {
	out := make([]Observation, 0, MaxObservations)
	if len(prev) >= MaxObservations {
		prev = prev[len(prev)-MaxObservations+1:]
	}
	return append(append(out, prev...), o)
}

// Health is the node's health as the pipeline sees it.
type Health string

const (
	HealthOK       Health = "ok"
	HealthDegraded Health = "degraded"
)

// nextConflict computes the conflict record a quarantine writes: nil when
// the case already records exactly this contradiction from this entry
// (idempotent). The same contradiction from another entry adds that
// entry's observation without a new case revision.
func nextConflict(prev *ConflictCase, c ConflictCase) (*ConflictCase, error) {
	obs := Observation{EntryID: c.EntryID, Type: c.Type, Incoming: c.Incoming, At: c.Opened}
	if prev == nil {
		c.Revision, c.Open = 1, true
		c.Observations = []Observation{obs}
		return &c, nil
	}
	if prev.Open && prev.Current == c.Current && prev.Incoming == c.Incoming && prev.Reason == c.Reason {
		if observed(prev, c.EntryID) || c.EntryID == "" {
			return nil, nil
		}
		n := *prev
		n.Observations = appendObservation(prev.Observations, obs)
		if len(c.Payload) > 0 {
			n.Payload = c.Payload
		}
		return &n, nil
	}
	if prev.Revision == math.MaxUint64 {
		return nil, fmt.Errorf("pipeline: conflict case %s/%s: revision overflow; resolve the case", c.Machine, c.Instance)
	}
	c.Revision = prev.Revision + 1
	c.Open = true
	c.Resolution = prev.Resolution
	if prev.Open {
		c.Opened = prev.Opened
		c.Observations = appendObservation(prev.Observations, obs)
	} else {
		c.Observations = []Observation{obs}
	}
	return &c, nil
}

// quarantinePlan builds the command of a fact whose transition is illegal:
// no domain effect, state preserved, the conflict case written.
func (p *Pipeline) quarantinePlan(ctx context.Context, log Log, e *entry, t guardTransition, reason string) {
	p.quarantineWith(ctx, log, e, t, reason, []guardTransition{t})
}

// quarantineWith is quarantinePlan with the transitions the command carries
// for the apply-time guard (none when the handler declined the fact: the
// guard itself found the transition legal).
func (p *Pipeline) quarantineWith(ctx context.Context, log Log, e *entry, t guardTransition, reason string, carry []guardTransition) {
	key := ConflictKey(t.Machine, t.Instance)
	rec, ok := e.stateOf(key)
	if !ok {
		r, found, err := log.Get(ctx, key, false)
		if err != nil {
			e.plan, e.planOut = planRetry, &Outcome{Status: StatusUnavailable, Reason: "reading state: " + err.Error()}
			return
		}
		if found {
			rec = r
		} else {
			rec = kv.Record{Key: key}
		}
	}
	var prev *ConflictCase
	if rec.Rev != 0 {
		var c ConflictCase
		if err := json.Unmarshal(rec.Value, &c); err == nil {
			prev = &c
		}
	}
	c := ConflictCase{Machine: t.Machine, Instance: t.Instance, EntryID: e.userID, Type: e.typ,
		Current: t.From, Incoming: t.To, Reason: reason, Opened: p.clock.Now().UTC().Format("2006-01-02T15:04:05.000Z07:00"),
		Payload: json.RawMessage(e.json)}
	if c.Current == "" {
		c.Current = "(absent)"
	}
	next, err := nextConflict(prev, c)
	*e.cmd = p.baseCmd(e, VerdictQuarantine, guardInfo{Reason: reason, Transitions: carry})
	e.verdict = VerdictQuarantine
	if err != nil {
		p.lg.Error("pipeline: conflict case not updated", "err", err)
	} else if next != nil {
		v, _ := json.Marshal(next)
		e.cmd.Effect.Writes = []kv.Write{{Key: key, Value: v, IfRev: rec.Rev}}
	}
	p.lg.Warn("pipeline: fact contradicts state; quarantined, state preserved (W8)",
		"type", e.typ, "id", e.userID, "machine", t.Machine, "instance", t.Instance, "current", c.Current, "incoming", t.To, "reason", reason)
	e.plan = planPropose
}

// Conflicts lists the conflict cases (open and resolved).
func (p *Pipeline) Conflicts(ctx context.Context) ([]ConflictCase, error) {
	recs, err := p.log.List(ctx, ConflictPrefix, false)
	if err != nil {
		return nil, fmt.Errorf("pipeline: conflicts: %w", err)
	}
	out := make([]ConflictCase, 0, len(recs))
	for _, r := range recs {
		var c ConflictCase
		if err := json.Unmarshal(r.Value, &c); err != nil {
			return nil, fmt.Errorf("pipeline: conflict case %s: %w", r.Key, err)
		}
		out = append(out, c)
	}
	return out, nil
}

// Health is degraded while any conflict case is open.
func (p *Pipeline) Health(ctx context.Context) (Health, int, error) {
	cs, err := p.Conflicts(ctx)
	if err != nil {
		return HealthDegraded, 0, err
	}
	open := 0
	for _, c := range cs {
		if c.Open {
			open++
		}
	}
	if open > 0 {
		return HealthDegraded, open, nil
	}
	return HealthOK, 0, nil
}

const typeConflictResolve = "writ.conflict.resolve"

// ResolveConflict closes the open conflict case of a machine instance after
// an operator has dealt with it (the state stays as it is). It answers like
// a request: COMMITTED once the closed case is applied here (also when it
// was already closed), REJECTED when there is no such case. Health returns
// to ok when no case is open.
func (p *Pipeline) ResolveConflict(ctx context.Context, machine, instance, note string) Outcome {
	return p.wait(ctx, p.ResolveConflictAsync(ctx, machine, instance, note))
}

// ResolveConflictAsync starts ResolveConflict and returns its handle.
func (p *Pipeline) ResolveConflictAsync(ctx context.Context, machine, instance, note string) *Handle {
	key := ConflictKey(machine, instance)
	now := p.clock.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return doneHandle(p, Outcome{ID: key, Type: typeConflictResolve, Status: StatusUnavailable, Reason: ErrStopped.Error()})
	}
	e := &entry{kind: kindRequest, class: ir.ClassRequest, typ: typeConflictResolve, cmdID: "resolve:" + key, userID: key,
		keys: []string{key}, x: &entryExtra{resolve: key, note: note}, deadline: p.deadlineAt(now.Add(p.cfg.CommitTimeout))}
	if cur := p.live[e.cmdID]; cur != nil && !cur.replied {
		return &Handle{e: cur, p: p}
	}
	p.enqueueLocked(e, false)
	p.wakeup()
	e.h = Handle{e: e, p: p}
	return &e.h
}

// planResolve builds the command that closes a conflict case.
func (p *Pipeline) planResolve(ctx context.Context, log Log, e *entry) {
	if err := p.readState(ctx, log, e); err != nil {
		e.plan, e.planOut = planRetry, &Outcome{Status: StatusUnavailable, Reason: "reading state: " + err.Error()}
		return
	}
	rec := e.state[0]
	if rec.Rev == 0 {
		// confirm against current state before saying there is none
		p.rejectConfirmed(ctx, log, e, "no conflict case at "+e.resolveKey())
		return
	}
	var c ConflictCase
	if err := json.Unmarshal(rec.Value, &c); err != nil {
		e.plan, e.planOut = planFinish, &Outcome{Status: StatusRejected, Reason: "conflict case unreadable: " + err.Error()}
		return
	}
	if !c.Open {
		e.plan, e.planOut = planFinish, &Outcome{Status: StatusCommitted, Index: rec.Rev, Reason: "already resolved"}
		return
	}
	c.Open = false
	if r := e.x.resolution; r != nil {
		res := *r
		res.At = p.clock.Now().UTC().Format("2006-01-02T15:04:05.000Z07:00")
		res.CaseRevision = c.Revision
		c.Resolution = &res
	} else if e.x.note != "" {
		c.Reason += "; resolved: " + e.x.note
	}
	verdict, g, mw := VerdictNone, guardInfo{}, []kv.Write(nil)
	if r := e.x.resolution; r != nil && r.ApplyIncoming {
		t, w, why := p.applyIncomingPlan(e, &c)
		if why != "" {
			e.plan, e.planOut = planFinish, &Outcome{Status: StatusRejected, Field: "apply_incoming", Reason: why}
			return
		}
		verdict, g, mw = VerdictOverride, guardInfo{Transitions: []guardTransition{t}}, []kv.Write{w}
		c.Resolution.Applied = appliedOf(&c, t)
	}
	v, _ := json.Marshal(c)
	// one command ID per case revision: a retry deduplicates, a later case
	// on the same instance can be resolved again
	*e.cmd = p.baseCmd(e, verdict, g)
	e.cmd.ID = e.cmdID + ":" + strconv.FormatUint(rec.Rev, 10)
	e.cmd.Effect.Writes = append([]kv.Write{{Key: e.x.resolve, Value: v, IfRev: rec.Rev}}, mw...)
	e.plan = planPropose
}
