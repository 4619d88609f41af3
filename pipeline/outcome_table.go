package pipeline

import (
	"bytes"
	"context"
	"fmt"

	"github.com/writ-dev/writ/kv"
)

// Outcome lookups answer from the log's replicated outcome table, which
// every replica applies identically (and which snapshots carry), so every
// node gives the same answer for an ID the table holds. This node's own
// knowledge adds only what the table cannot know yet: a request in flight
// here, or timed out here with its fence not yet landed (both UNCERTAIN),
// and a refusal of an attempt that was never appended (UNAVAILABLE,
// REJECTED without an index). The outcome cache never overrides the table;
// it only lends a committed outcome its handler result when the table
// confirms it at the same index.

// OutcomeQuery says how to look up a request's outcome.
type OutcomeQuery struct {
	// Serializable reads this node's applied table as it stands. By
	// default a lookup is linearizable: it first confirms a read index
	// with a quorum and waits until this node applied it (the Log's
	// ReadBarrier), as a linearizable Get does.
	Serializable bool
	// Settle makes a missing outcome definite: when the table holds no
	// definite outcome for the ID and no attempt is in flight on this
	// node, a fence for the ID is committed first, so the answer is
	// COMMITTED (an attempt applied before the fence) or NOT_COMMITTED
	// (no attempt can ever commit now). Use it only once the request's
	// commit timeout has passed: it ends every attempt still in flight
	// anywhere as NOT_COMMITTED.
	Settle bool
}

// Outcome returns what is known about a request ID (see OutcomeQuery).
// ok=false: nothing is recorded, and nothing is in flight here.
func (p *Pipeline) Outcome(ctx context.Context, requestID string, q OutcomeQuery) (Outcome, bool, error) {
	p.mu.Lock()
	log := p.log
	p.mu.Unlock()
	if log == nil {
		return Outcome{}, false, fmt.Errorf("pipeline: outcome: %w", ErrStopped)
	}
	if !q.Serializable {
		if rb, ok := log.(ReadBarrier); ok {
			if err := rb.ReadBarrier(ctx); err != nil {
				return Outcome{}, false, fmt.Errorf("pipeline: outcome %q: %w", requestID, err)
			}
		}
	}
	o, ok := p.OutcomeOf(requestID)
	if !q.Settle || (ok && o.Status != StatusUncertain && o.Status != StatusUnavailable) {
		return o, ok, nil
	}
	cmdID := requestCmdID(requestID)
	p.mu.Lock()
	e := p.live[cmdID]
	inFlight := e != nil && !e.replied
	p.mu.Unlock()
	if inFlight {
		// Its own commit timeout fences it here.
		return o, ok, nil
	}
	if err := p.settle(ctx, cmdID); err != nil {
		return Outcome{}, false, err
	}
	o, ok = p.OutcomeOf(requestID)
	return o, ok, nil
}

// OutcomeOf is Outcome with Serializable set and no settling: this node's
// applied table as it stands, then what this node itself knows.
func (p *Pipeline) OutcomeOf(requestID string) (Outcome, bool) {
	id := requestCmdID(requestID)
	p.mu.Lock()
	log := p.log
	p.mu.Unlock()
	if canaryOutcomeStaleCache {
		// canary build: the cache answers, unconfirmed by the table.
		p.mu.Lock()
		o, ok := p.outcomes.get(id)
		p.mu.Unlock()
		if ok {
			return o, true
		}
	}
	var rec kv.Result
	var recorded bool
	if log != nil {
		if rec, recorded = log.Outcome(id); recorded {
			if o, ok := p.fromTable(requestID, id, rec); ok {
				return o, true
			}
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if e := p.live[id]; e != nil && !e.replied {
		return Outcome{ID: requestID, Type: e.typ, Status: StatusUncertain, Reason: "in flight"}, true
	}
	if _, unsure := p.uncert[id]; unsure || p.fencePendingLocked(id) {
		return Outcome{ID: requestID, Status: StatusUncertain,
			Reason: "not confirmed within the commit timeout; a fence is being committed to make the outcome definite: ask again"}, true
	}
	if recorded {
		// The latest attempt failed a precondition; nothing applied.
		return Outcome{ID: requestID, Index: rec.Index, Status: StatusUnavailable, Reason: "not applied: " + rec.Reason}, true
	}
	if o, ok := p.outcomes.get(id); ok && (o.Status == StatusUnavailable || (o.Status == StatusRejected && o.Index == 0)) {
		// Refused before it was appended; the table holds no attempt.
		return o, true
	}
	return Outcome{}, false
}

// fromTable turns the table's record into an outcome; ok=false for a
// record that is not an answer yet (the latest attempt conflicted).
func (p *Pipeline) fromTable(requestID, cmdID string, r kv.Result) (Outcome, bool) {
	o := Outcome{ID: requestID, Index: r.Index, Verdict: Verdict(r.Verdict)}
	p.mu.Lock()
	cached, hit := p.outcomes.get(cmdID)
	p.mu.Unlock()
	switch r.Status {
	case kv.StatusApplied, kv.StatusDuplicate:
		if r.Status == kv.StatusDuplicate {
			o.Index = r.FirstIndex
		}
		o.Status = StatusCommitted
		if o.Verdict == VerdictReject {
			o.Status = StatusRejected
			o.Reason = fmt.Sprintf("refused by the machine's guard; recorded at index %d", o.Index)
		}
		if hit && cached.Index == o.Index && cached.Status == o.Status {
			// The table confirms this node's answer: keep its details.
			o.Type, o.Result = cached.Type, cached.Result
			if cached.Reason != "" {
				o.Reason = cached.Reason
			}
		}
	case kv.StatusRejected:
		o.Status, o.Reason = StatusRejected, r.Reason
	case kv.StatusFenced:
		o = fencedOutcome(cmdID, "", r)
		o.ID = requestID
	default:
		return Outcome{}, false
	}
	return o, true
}

// reusedWith reports whether payload differs from the payload the table
// recorded for the ID (digests of the canonical JSON; 0 = not recorded).
func reusedWith(payload []byte, r kv.Result) bool {
	if r.Digest == 0 || canaryReuseAccepted {
		return false
	}
	d := kv.PayloadDigest(payload)
	return d != 0 && d != r.Digest
}

const reusedReason = "request ID reused with a different payload"

// reuseRule is the Rule of a reuse refusal (reusedOutcome).
const reuseRule = "idempotency"

func reusedOutcome(index uint64) Outcome {
	return Outcome{Status: StatusRejected, Index: index, Field: "request_id", Rule: reuseRule,
		Reason: fmt.Sprintf("%s: the ID was first applied at index %d with another payload; use a new request ID for a new operation", reusedReason, index)}
}

// planRecorded plans an entry whose command ID the table already holds
// a definite outcome for; false when it must be evaluated.
func (p *Pipeline) planRecorded(log Log, e *entry) bool {
	r, ok := log.Outcome(e.cmdID)
	if !ok {
		return false
	}
	switch r.Status {
	case kv.StatusApplied, kv.StatusDuplicate:
		idx := r.Index
		if r.Status == kv.StatusDuplicate {
			idx = r.FirstIndex
		}
		switch {
		case reusedWith(e.json, r) && e.kind == kindRequest:
			e.plan, e.planOut = planFinish, ptrTo(reusedOutcome(idx))
			return true
		case reusedWith(e.json, r):
			p.lg.Error("pipeline: fact ID reused with a different payload; the first one is committed, this one is not applied",
				"id", e.cmdID, "type", e.typ, "first_index", idx)
		case e.kind == kindRequest && Verdict(r.Verdict) == VerdictReject:
			e.plan, e.planOut = planIdentity, &Outcome{Status: StatusRejected, Index: idx, Verdict: VerdictReject, Duplicate: true,
				Reason: fmt.Sprintf("refused by the machine's guard; recorded at index %d", idx)}
			return true
		}
		e.plan, e.planOut = planIdentity, &Outcome{Status: StatusCommitted, Index: idx, Duplicate: true}
		return true
	case kv.StatusFenced:
		if e.kind != kindRequest {
			return false
		}
		e.plan, e.planOut = planFinish, ptrTo(fencedOutcome(e.cmdID, e.typ, r))
		return true
	}
	return false
}

// reusedAppliedLocked finishes a live entry whose ID applied with another
// payload (the apply result of its own or another node's attempt);
// false when the payloads match.
func (p *Pipeline) reusedAppliedLocked(e *entry, cmd *kv.Command, res kv.Result) bool {
	if res.Status == kv.StatusApplied {
		// The recorded digest is cmd's own: compare the bytes instead of
		// hashing them again (the common case, an entry's own command).
		if res.Digest == 0 || canaryReuseAccepted || bytes.Equal(cmd.Payload, e.json) {
			return false
		}
	} else if !reusedWith(e.json, res) {
		return false
	}
	idx := res.Index
	if res.Status == kv.StatusDuplicate && res.FirstIndex != 0 {
		idx = res.FirstIndex
	}
	if e.kind == kindFact {
		p.lg.Error("pipeline: fact ID reused with a different payload; the first one is committed, this one is not applied",
			"id", e.cmdID, "type", e.typ, "first_index", idx)
		p.factDoneLocked(e, idx, "vetoed at apply: the ID was first applied with another payload")
		return true
	}
	p.finishLocked(e, reusedOutcome(idx))
	return true
}

// fencedLocked finishes a live entry whose command applied as fenced.
func (p *Pipeline) fencedLocked(e *entry, res kv.Result) {
	if e.kind != kindRequest {
		// Only request IDs are fenced; a fact is never given up.
		p.lg.Error("pipeline: a fact's ID is fenced; it stays in the outbox", "id", e.cmdID)
		return
	}
	p.trace("apply", e, res.Index, "fenced: "+res.Reason)
	p.finishLocked(e, fencedOutcome(e.cmdID, e.typ, res))
}

// reusedAtIngress refuses an entry whose ID is already in flight here or
// recorded in the table with another payload, before it is accepted
// (for a fact: before it is acknowledged). nil: not a reuse.
func (p *Pipeline) reusedAtIngressLocked(cmdID string, payload []byte) *Outcome {
	if cur := p.live[cmdID]; cur != nil && !cur.finished && cur.json != nil && !bytes.Equal(cur.json, payload) {
		return &Outcome{Status: StatusRejected, Field: "request_id", Rule: reuseRule,
			Reason: reusedReason + ": an operation with this ID and another payload is in flight on this node; use a new ID for a new operation"}
	}
	return nil
}

// reusedInTable is the table half of reusedAtIngressLocked (without the
// lock).
func reusedInTable(log Log, cmdID string, payload []byte) *Outcome {
	if log == nil {
		return nil
	}
	r, ok := log.Outcome(cmdID)
	if !ok || (r.Status != kv.StatusApplied && r.Status != kv.StatusDuplicate) || !reusedWith(payload, r) {
		return nil
	}
	idx := r.Index
	if r.Status == kv.StatusDuplicate {
		idx = r.FirstIndex
	}
	return &Outcome{Status: StatusRejected, Index: idx, Field: "request_id", Rule: reuseRule,
		Reason: fmt.Sprintf("%s: the ID was first applied at index %d with another payload; use a new ID for a new operation", reusedReason, idx)}
}

// factReused refuses a fact whose ID is retained here or committed with
// another payload: before it is acknowledged, so its reporter learns it and
// nothing acknowledged is dropped. nil: not a reuse.
func (p *Pipeline) factReused(ps validated) *Outcome {
	cmdID := factCmdID(ps.desc.Name, ps.id)
	p.mu.Lock()
	log := p.log
	o := p.reusedAtIngressLocked(cmdID, ps.json)
	p.mu.Unlock()
	if o == nil {
		o = reusedInTable(log, cmdID, ps.json)
	}
	if o != nil {
		o.Type, o.ID = ps.desc.Name, ps.id
		o.Reason = "fact " + o.Reason[len("request "):]
		o.Field = "id"
	}
	return o
}
