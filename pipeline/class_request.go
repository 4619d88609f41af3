package pipeline

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/writ-dev/writ/kv"
	"github.com/writ-dev/writ/schema/ir"
)

// Submit runs a request to its outcome (W1, W2): it returns COMMITTED only
// after every entry the request produced is committed and applied here.
func (p *Pipeline) Submit(ctx context.Context, en Entry) Outcome {
	if o, ok := p.admitRequest(en); !ok {
		return o
	}
	defer p.adm.inflight.Add(-1)
	h := p.submit(ctx, en, true)
	return p.wait(ctx, h)
}

func (p *Pipeline) wait(ctx context.Context, h *Handle) Outcome {
	done := h.Done()
	select {
	case <-done:
	case <-ctx.Done():
		p.mu.Lock()
		if !h.e.replied {
			p.timeoutLocked(h.e, "request context ended: "+ctx.Err().Error())
		}
		p.mu.Unlock()
		<-done
	}
	return h.Outcome()
}

// SubmitAsync starts a request and returns its handle without waiting.
func (p *Pipeline) SubmitAsync(ctx context.Context, en Entry) *Handle {
	return p.submit(ctx, en, false)
}

// submit starts a request; waiter says the caller waits on it, so its Done
// channel is made at once (under the lock startRequest takes anyway).
func (p *Pipeline) submit(ctx context.Context, en Entry, waiter bool) *Handle {
	ps, bad := p.validate(en)
	if bad != nil {
		bad.ID = en.ID
		p.traceReject(en, bad)
		return doneHandle(p, *bad)
	}
	if ps.class != ir.ClassRequest {
		o := reject(en.Type, "type", "class request", fmt.Sprintf("type is class %s: use %s", ps.class, verbFor(ps.class)))
		o.ID = ps.id
		return doneHandle(p, o)
	}
	return p.startRequest(ctx, ps, false, waiter)
}

func (p *Pipeline) startRequest(ctx context.Context, ps validated, receiptItem, waiter bool) *Handle {
	now := p.clock.Now()
	deadline := now.Add(p.cfg.CommitTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	// Built before taking the lock; dropped if the request is already in
	// flight.
	e := p.newEntry(kindRequest, ps, "req:", ps.id)
	if !receiptItem || canaryReceiptDropped {
		e.deadline = p.deadlineAt(deadline) // a receipt item's starts at its proposal (class_receipt.go)
	}
	e.tm = p.mtiming(now)
	e.receiptItem = receiptItem
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return doneHandle(p, Outcome{ID: ps.id, Type: ps.desc.Name, Status: StatusUnavailable, Reason: ErrStopped.Error()})
	}
	if o := p.reusedAtIngressLocked(e.cmdID, e.json); o != nil && !receiptItem {
		o.ID, o.Type = ps.id, ps.desc.Name
		return doneHandle(p, *o)
	}
	if cur := p.live[e.cmdID]; cur != nil && !cur.replied {
		if o, ok := p.appliedInFlushLocked(cur, e); ok && !receiptItem {
			o.ID, o.Type = ps.id, ps.desc.Name
			return doneHandle(p, o)
		}
		// Same request ID already in flight: share its outcome.
		if waiter {
			cur.doneLocked()
		}
		return &Handle{e: cur, p: p}
	}
	if waiter {
		e.doneLocked()
	}
	p.trace("validate", e, 0, "ok")
	p.enqueueLocked(e, false)
	p.wakeup()
	e.h = Handle{e: e, p: p}
	return &e.h
}

// appliedInFlushLocked answers a retry e (built, not queued) of a request
// cur that is still in flight although this node already observed its
// application: the application arrived while cur's flush was settling, and
// cur is answered when that flush ends. The ID had been applied when the
// retry arrived, so the retry is answered as a retry after cur's reply
// would be, from the outcome table: a duplicate of the application
// (Outcome.Duplicate), or the table's other definite answers. Sharing
// cur's outcome instead told the retry it was not a duplicate.
func (p *Pipeline) appliedInFlushLocked(cur, e *entry) (Outcome, bool) {
	if cur.x == nil || cur.x.late == nil || p.log == nil {
		return Outcome{}, false
	}
	if !p.planRecorded(p.log, e) || e.planOut == nil {
		return Outcome{}, false
	}
	return *e.planOut, true
}

// reproposal is a pending re-proposal of the requests in flight at a
// leader change (leaderChangedForRequestsLocked).
type reproposal struct {
	due     bool
	applied uint64    // the log's applied index when the change was seen
	at      time.Time // LeaderSettle after the change
}

// leaderChangedForRequestsLocked starts a new leader generation. A request
// proposed under an older one may have been lost: raft forwards a
// follower's proposal to the leader it knows, and if that leader dies or
// loses its term before appending it, the proposal is dropped without an
// answer; its requester would wait out the commit timeout and hear
// UNCERTAIN. Such requests are proposed again once the new leader settled:
// as soon as this node applies anything past the change (the new leader's
// first commit carries every earlier entry that survived, so a surviving
// proposal answers its request first and is not proposed twice), or after
// LeaderSettle.
func (p *Pipeline) leaderChangedForRequestsLocked(st kv.LogStatus, now time.Time) {
	p.leaderGen.Add(1)
	p.repropose = reproposal{due: true, applied: st.Applied, at: now.Add(p.cfg.LeaderSettle)}
}

// reproposeRequestsLocked proposes again, once the leader settled, every
// request still waiting on a proposal made under an older leader. Each
// keeps its ID and deadline and is evaluated again, as a retry with the
// same ID would be (W2): if the earlier proposal commits after all, the
// outcome table answers the request (planIdentity) or the new attempt
// applies as a duplicate of it, so the ID applies once either way; a
// failed precondition of the earlier attempt no longer counts (attempt
// numbers).
func (p *Pipeline) reproposeRequestsLocked(st kv.LogStatus, now time.Time) {
	r := &p.repropose
	if !r.due || !hasLeader(st) || (st.Applied <= r.applied && now.Before(r.at)) {
		return
	}
	r.due = false
	gen := p.leaderGen.Load()
	var again []*entry
	for id, e := range p.live {
		if e.kind != kindRequest || !e.proposed || e.replied || e.finished || e.inFlush || e.gen == gen || id != e.cmdID {
			continue
		}
		again = append(again, e)
	}
	// In ID order, not the map's, so a deterministic driver sees the same
	// proposals on every run; each goes to the front, so the queue holds
	// them in ID order ahead of the rest.
	slices.SortFunc(again, func(a, b *entry) int { return strings.Compare(b.cmdID, a.cmdID) })
	for _, e := range again {
		p.unlatchLocked(e)
		e.proposed, e.mayCommit = false, true
		p.trace("requeue", e, 0, "leader changed: propose again")
		p.enqueueLocked(e, true)
	}
	if n := len(again); n > 0 {
		p.trace0("leader", "", "", fmt.Sprintf("term %d leader %q: %d in-flight requests proposed again", st.Term, st.LeaderID, n))
		p.wakeup()
	}
}
