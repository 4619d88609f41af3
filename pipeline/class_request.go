package pipeline

import (
	"context"
	"fmt"

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

// reproposeRequestLocked proposes an in-flight request again at a leader
// change (leaderChangeLocked). A proposal forwarded to a leader that died,
// or appended by a leader that lost its term before committing it, is
// silently lost; without this the requester would wait for its commit
// timeout and learn only UNCERTAIN. The request keeps its ID and deadline
// and is evaluated again, in front of the queue, as a retry with the same
// ID would be (W2): if the earlier attempt committed after all, the outcome
// table answers it (planIdentity) or the new attempt applies as a
// duplicate of it, so the ID applies once either way; a failed
// precondition of the earlier attempt no longer counts (attempt numbers).
func (p *Pipeline) reproposeRequestLocked(e *entry) {
	p.unlatchLocked(e)
	e.proposed = false
	p.trace("requeue", e, 0, "leader changed: propose again")
	p.enqueueLocked(e, true)
}
