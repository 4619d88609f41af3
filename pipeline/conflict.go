package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/writ-dev/writ/kv"
)

// ConflictCase is a durable record of a fact that contradicted state (W8):
// the fact was not applied, the state was preserved. One case is kept per
// machine instance, at _conflict/<machine>/<instance>. Re-observing the same
// contradiction changes nothing; a different one bumps Revision.
type ConflictCase struct {
	Machine  string `json:"machine"`
	Instance string `json:"instance"`
	EntryID  string `json:"entry_id"`
	Type     string `json:"type"`
	Current  string `json:"current"`
	Incoming string `json:"incoming"`
	Reason   string `json:"reason"`
	Revision uint64 `json:"revision"`
	Open     bool   `json:"open"`
	// Opened is when the proposer first saw the case (RFC 3339).
	Opened string `json:"opened"`
}

// Health is the node's health as the pipeline sees it.
type Health string

const (
	HealthOK       Health = "ok"
	HealthDegraded Health = "degraded"
)

// nextConflict computes the conflict record a quarantine writes: nil when
// the case already records exactly this contradiction (idempotent).
func nextConflict(prev *ConflictCase, c ConflictCase) (*ConflictCase, error) {
	if prev == nil {
		c.Revision, c.Open = 1, true
		return &c, nil
	}
	if prev.Open && prev.Current == c.Current && prev.Incoming == c.Incoming && prev.Reason == c.Reason {
		return nil, nil
	}
	if prev.Revision == math.MaxUint64 {
		return nil, fmt.Errorf("pipeline: conflict case %s/%s: revision overflow; resolve the case", c.Machine, c.Instance)
	}
	c.Revision = prev.Revision + 1
	c.Open = true
	if prev.Open {
		c.Opened = prev.Opened
	}
	return &c, nil
}

// quarantinePlan builds the command of a fact whose transition is illegal:
// no domain effect, state preserved, the conflict case written.
func (p *Pipeline) quarantinePlan(ctx context.Context, log Log, e *entry, t guardTransition, reason string) {
	key := ConflictKey(t.Machine, t.Instance)
	rec, ok := e.stateOf(key)
	if !ok {
		r, found, err := log.Get(ctx, key, false)
		if err != nil {
			e.plan, e.planOut = planRetry, Outcome{Status: StatusUnavailable, Reason: "reading state: " + err.Error()}
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
		Current: t.From, Incoming: t.To, Reason: reason, Opened: p.clock.Now().UTC().Format("2006-01-02T15:04:05.000Z07:00")}
	if c.Current == "" {
		c.Current = "(absent)"
	}
	next, err := nextConflict(prev, c)
	*e.cmd = p.baseCmd(e, VerdictQuarantine, guardInfo{Reason: reason, Transitions: []guardTransition{t}})
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

var timeZero time.Time
