package pipeline

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/writ-dev/writ/kv"
	"github.com/writ-dev/writ/schema/ir"
)

func (p *Pipeline) factFromOutbox(it OutboxItem) (*entry, error) {
	e := &entry{kind: kindFact, class: ir.ClassFact, typ: it.Type, cmdID: it.ID, userID: it.ID, json: it.Payload}
	d, ok := p.cat.Type(it.Type)
	if !ok || d.ParseJSON == nil {
		return e, fmt.Errorf("pipeline: type %q is not declared by this schema", it.Type)
	}
	pl, err := d.ParseJSON(it.Payload)
	if err != nil {
		return e, fmt.Errorf("pipeline: %w", err)
	}
	ps := validated{desc: d, class: ir.ClassFact, payload: pl, json: it.Payload, id: pl.IdempotencyKey()}
	ne := p.newEntry(kindFact, ps, it.ID)
	ne.userID = strings.TrimPrefix(it.ID, "fact:"+it.Type+":")
	return ne, nil
}

// Report accepts a fact (W3): the Ack says Received only after the fact is
// fsync'd into this node's outbox; the pipeline then proposes it until it is
// committed, with no timeout and with or without a leader.
func (p *Pipeline) Report(ctx context.Context, en Entry) Ack {
	ps, bad := p.validate(en)
	if bad != nil {
		p.traceReject(en, bad)
		return Ack{ID: en.ID, Status: bad.Status, Reason: bad.Reason, Field: bad.Field, Rule: bad.Rule}
	}
	if ps.class != ir.ClassFact {
		o := reject(en.Type, "type", "class fact", fmt.Sprintf("type is class %s: use %s", ps.class, verbFor(ps.class)))
		return Ack{ID: ps.id, Status: o.Status, Reason: o.Reason, Field: o.Field, Rule: o.Rule}
	}
	if o := p.factReused(ps); o != nil {
		return Ack{ID: ps.id, Status: o.Status, Reason: o.Reason, Field: o.Field, Rule: o.Rule}
	}
	if err := p.acceptFacts([]validated{ps}); err != nil {
		return notReceived(ps.id, err)
	}
	return Ack{Received: true, ID: ps.id}
}

// notReceived is the Ack for facts (a fact, or a receipt's fact items) the
// outbox did not make durable. A record that may be in the file makes the
// outcome unknown (UNCERTAIN, W2): the node stops on the failure, reloads
// the outbox when it starts again and commits what it finds. Otherwise
// nothing was written (UNAVAILABLE; RESOURCE_EXHAUSTED at a bound).
func notReceived(id string, err error) Ack {
	cause := error(nil)
	if oe := (*OutboxError)(nil); errors.As(err, &oe) {
		cause = oe
	}
	switch {
	case errors.Is(err, ErrOutboxUncertain):
		if cause == nil {
			cause = err
		}
		return Ack{ID: id, Status: StatusUncertain, Reason: fmt.Sprintf("%v after the fact's record was written: "+
			"not acknowledged, and it may still commit (this node stops and reloads its outbox from disk when it restarts): "+
			"report it again with the same ID, which is deduplicated", cause)}
	case cause != nil:
		return Ack{ID: id, Status: StatusUnavailable, Reason: fmt.Sprintf("%v: nothing of this fact was written "+
			"(none of it reached the file before the outbox failed), and this node stops to recover from disk: report it to another node", cause)}
	}
	return Ack{ID: id, Status: StatusUnavailable, Reason: err.Error(), Overloaded: errors.Is(err, ErrOutboxFull)}
}

// OutboxFailed is closed when a write or fsync of the fact outbox failed.
// The node must then stop, as on a WAL failure, and recover from disk when
// restarted (W10); OutboxErr says what failed. The failure is logged once,
// at ERROR, when it happens.
func (p *Pipeline) OutboxFailed() <-chan struct{} { return p.outbox.Failed() }

// OutboxErr is the outbox's storage failure (an *OutboxError), nil while
// there is none.
func (p *Pipeline) OutboxErr() error {
	if e := p.outbox.storageErr(); e != nil {
		return e
	}
	return nil
}

// logOutboxFailure is the one ERROR line of an outbox failure.
func (p *Pipeline) logOutboxFailure(e *OutboxError) {
	p.lg.Error("pipeline: outbox write/fsync failed; nothing more is acknowledged, and the node stops and recovers from disk on restart",
		"file", e.Path, "op", e.Op, "err", e.cause())
}

// acceptFacts makes facts durable, then queues them.
func (p *Pipeline) acceptFacts(facts []validated) error {
	now := p.clock.Now().UTC()
	items := make([]OutboxItem, len(facts))
	es := make([]*entry, len(facts))
	for i, ps := range facts {
		es[i] = p.newEntry(kindFact, ps, "fact:", ps.desc.Name, ":", ps.id)
		items[i] = OutboxItem{ID: es[i].cmdID, Type: ps.desc.Name, Payload: ps.json, Received: now}
	}
	if err := p.addFacts(items); err != nil {
		return err
	}
	p.mreceived(es)
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, e := range es {
		if p.live[e.cmdID] != nil {
			continue
		}
		p.trace("outbox", e, 0, "fsync ok, received")
		p.enqueueLocked(e, false)
	}
	p.wakeup()
	return nil
}

// confirmFacts looks up (outside the lock) the log's recorded outcome of
// the given facts and retires those applied here. Restored calls it for the
// facts whose proposal is unconfirmed when the node installs a snapshot: the
// entries a snapshot covers are never reported one by one, and without
// this such a fact (and every later fact on its keys) could wait a full
// CommitTimeout before being re-proposed.
func (p *Pipeline) confirmFacts(ids []string) {
	p.mu.Lock()
	log := p.log
	p.mu.Unlock()
	var hits []kv.Result
	var hitIDs []string
	for _, id := range ids {
		if r, ok := log.Outcome(id); ok && (r.Status == kv.StatusApplied || r.Status == kv.StatusDuplicate) {
			hits, hitIDs = append(hits, r), append(hitIDs, id)
		}
	}
	if len(hits) == 0 {
		return
	}
	applied := log.Status().Applied
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, r := range hits {
		e := p.live[hitIDs[i]]
		if e == nil || e.finished || e.inFlush || r.Index > applied {
			continue
		}
		p.trace("apply", e, r.Index, "confirmed from the log's recorded outcome")
		p.factDoneLocked(e, r.Index, "done")
	}
}

func hasLeader(st kv.LogStatus) bool { return st.IsLeader || st.LeaderID != "" }

// leaderChangeLocked releases retained facts when the log has a leader
// again or a new one (W3): a fact backing off from a leaderless period is
// proposed now rather than when its backoff expires, and a fact whose
// proposal is unconfirmed is proposed again now, because a proposal
// forwarded to a leader that died is silently lost and would otherwise
// hold its keys' latches (and every later fact on them) until the commit
// timeout. Proposing a fact twice is harmless: application is deduplicated
// by fact ID, and only the latest attempt's failed precondition counts.
// Requests in flight at the change are proposed again too, once the new
// leader settled (class_request.go).
func (p *Pipeline) leaderChangeLocked(now time.Time) {
	if p.log == nil || !p.started {
		return
	}
	st := p.log.Status()
	has := hasLeader(st)
	changed := st.Term != p.seenTerm || st.LeaderID != p.seenLeader || has != p.seenHas
	p.seenTerm, p.seenLeader, p.seenHas = st.Term, st.LeaderID, has
	if changed && has {
		p.leaderChangedForRequestsLocked(st, now)
	}
	p.reproposeRequestsLocked(st, now)
	if !changed || !has {
		return
	}
	released := 0
	for _, e := range p.live {
		if e.kind != kindFact || e.finished || e.inFlush {
			continue
		}
		switch {
		case e.proposed:
			p.unlatchLocked(e)
			e.proposed = false
			t := e.timing()
			t.backoff, t.notBefore = 0, time.Time{}
			p.enqueueLocked(e, false)
			released++
		case e.queued && now.Before(e.notBefore()):
			t := e.t // set: notBefore is in the future
			t.backoff, t.notBefore = 0, time.Time{}
			released++
		default:
			if e.t != nil {
				e.t.backoff = 0
			}
		}
	}
	if released > 0 {
		p.trace0("leader", "", "", fmt.Sprintf("term %d leader %q: %d retained facts proposed now", st.Term, st.LeaderID, released))
		p.wakeup()
	}
}

// factDoneLocked retires a committed fact from the outbox.
func (p *Pipeline) factDoneLocked(e *entry, index uint64, why string) {
	p.mfactDone(e, strings.HasPrefix(why, "vetoed"))
	e.finished = true
	p.unlatchLocked(e)
	p.dropLiveLocked(e)
	if err := p.outbox.Done(e.cmdID); err != nil && !errors.Is(err, ErrOutboxFailed) {
		// (an outbox failure is logged once, by logOutboxFailure)
		p.lg.Error("pipeline: outbox done record failed", "id", e.cmdID, "err", err)
	}
	p.trace("outbox", e, index, why)
	p.wakeup()
}
