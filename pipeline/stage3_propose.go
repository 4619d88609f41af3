package pipeline

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/writ-dev/writ/kv"
)

// proposedBatch is the hand-off from propose to the barrier: the commands
// of one flush appended as one batch, the proposal to wait on, and the
// entries whose outcome the proposal's own wait may deliver (await).
type proposedBatch struct {
	cmds    []kv.Command
	prop    kv.Proposal
	err     error
	await   bool     // a goroutine waits on prop (not in Manual mode)
	entries []*entry // proposed entries, when await
	gen     uint32   // leader changes seen before the append
}

// proposeBatch appends the commands of the entries planned to propose as
// one batch (outside the lock). arena holds every entry's command; when
// all of them propose it is the batch itself.
func (p *Pipeline) proposeBatch(ctx context.Context, log Log, batch []*entry, arena []kv.Command) proposedBatch {
	nprop := 0
	for _, e := range batch {
		if e.plan == planPropose {
			nprop++
		}
	}
	var pb proposedBatch
	if nprop == len(batch) {
		pb.cmds = arena
	} else if nprop > 0 {
		pb.cmds = make([]kv.Command, 0, nprop)
		for _, e := range batch {
			if e.plan == planPropose {
				pb.cmds = append(pb.cmds, *e.cmd)
			}
		}
	}
	if len(pb.cmds) > 0 {
		pb.gen = p.leaderGen.Load()
		t0 := p.mstart()
		pb.prop, pb.err = log.Propose(ctx, pb.cmds)
		p.mbatch(stageAppend, t0, batch)
	}
	pb.await = pb.prop != nil && !p.cfg.Manual
	return pb
}

// settleLocked hands every entry of the flush on by its plan: proposed
// entries to the barrier, finished ones to the reply, transient failures
// to retry, and entries to evaluate again back to the queue. An apply or a
// timeout that arrived during the flush is handled last.
func (p *Pipeline) settleLocked(log Log, batch []*entry, pb *proposedBatch) {
	var now time.Time // read when first needed
	for _, e := range batch {
		e.inFlush = false
		if e.plan != planRequeue {
			e.rounds = 0 // this evaluation ended; the next may ask for keys again
		}
		if e.plan == planFinish && e.kind == kindFact {
			// Only an apply retires a fact (factDoneLocked): finishing one
			// here would drop it while its record stays in the outbox.
			p.lg.Error("pipeline: a fact was planned to finish unapplied; it is retained and proposed again",
				"id", e.cmdID, "type", e.typ, "reason", e.planOut.Reason)
			e.plan = planRetry
		}
		switch e.plan {
		case planPropose:
			if !p.proposedLocked(e, pb, &now) {
				continue
			}
		case planFinish:
			p.finishLocked(e, *e.planOut)
		case planIdentity:
			if !p.identityLocked(log, e, &now) {
				continue
			}
		case planRetry:
			p.retryLocked(e, *e.planOut)
		case planRequeue:
			p.unlatchLocked(e)
			p.enqueueLocked(e, true)
			p.wakeup()
		}
		e.cmd = nil
		e.state = nil
		if x := e.x; x != nil && x.late != nil {
			l := x.late
			x.late = nil
			p.resolveLocked(e, &l.cmd, l.res)
		}
		if x := e.x; x != nil && x.timeoutWhy != "" {
			why := x.timeoutWhy
			x.timeoutWhy = ""
			p.timeoutLocked(e, why)
		}
	}
}

// proposedLocked records an entry whose command was appended (or handles
// the append's failure, returning false: the entry's flush scratch is left
// as it is). now is read on first need.
func (p *Pipeline) proposedLocked(e *entry, pb *proposedBatch, now *time.Time) bool {
	if perr := pb.err; perr != nil {
		definite := errors.Is(perr, kv.ErrNoLeader) || errors.Is(perr, kv.ErrDropped)
		p.trace("propose", e, 0, "error: "+perr.Error())
		if definite || e.kind == kindFact || e.kind == kindConfig {
			p.retryLocked(e, Outcome{Status: StatusUnavailable, Reason: "not appended: " + perr.Error()})
		} else {
			p.timeoutLocked(e, "propose failed with an unknown outcome: "+perr.Error())
		}
		return false
	}
	e.proposed = true
	e.gen = pb.gen
	if e.receiptItem && !canaryReceiptDropped {
		if now.IsZero() {
			*now = p.clock.Now()
		}
		p.armReceiptItemLocked(e, *now)
	}
	if e.kind != kindRequest {
		// facts and config decisions are proposed again when
		// unconfirmed for a while (tick); requests have a deadline
		if now.IsZero() {
			*now = p.clock.Now()
		}
		t := e.timing()
		t.proposedAt = *now
		t.proposals++
	}
	e.provisional = e.cmd.Effect
	p.releaseReadLatchesLocked(e)
	p.live[e.cmdID] = e
	if e.cmd.ID != e.cmdID {
		e.extra().altID = e.cmd.ID
		p.live[e.cmd.ID] = e
	}
	if p.cfg.Trace != nil {
		p.trace("propose", e, 0, fmt.Sprintf("attempt=%d writes=%d verdict=%s", e.attempt, len(e.cmd.Effect.Writes), Verdict(e.cmd.Verdict)))
	}
	if pb.await {
		pb.entries = append(pb.entries, e)
	}
	if canaryReplyBeforeCommit && e.kind == kindRequest {
		p.finishLocked(e, Outcome{Status: StatusCommitted}) // canary build: reply at propose
	}
	return true
}

// identityLocked finishes an entry found already applied (the log's
// outcome table has it), or returns false after queueing it again when
// this node has not applied that index yet.
func (p *Pipeline) identityLocked(log Log, e *entry, now *time.Time) bool {
	if idx := e.planOut.Index; idx > p.applied && idx > log.Status().Applied {
		// The log's outcome table is ahead of this node's apply
		// notifications: do not reply before the apply (W1).
		p.unlatchLocked(e)
		if now.IsZero() {
			*now = p.clock.Now()
		}
		e.timing().notBefore = now.Add(time.Millisecond)
		p.enqueueLocked(e, true)
		return false
	}
	if e.kind == kindFact {
		p.factDoneLocked(e, e.planOut.Index, "already applied")
		return false
	}
	if e.receiptItem {
		p.receiptItemAgainLocked(e) // no apply carries its outcome now
	}
	p.finishLocked(e, *e.planOut)
	return true
}

// endFlushLocked frees the flush's scratch for the next one.
func (p *Pipeline) endFlushLocked(batch []*entry, items []EvalItem, evalIdx []int) {
	clear(items)
	p.itemsBuf, p.idxBuf = items[:0], evalIdx[:0]
	clear(p.ownBuf)
	p.ownBuf = p.ownBuf[:0]
	clear(p.stateArena)
	p.stateArena = p.stateArena[:0]
	p.writeArena, p.byteArena = nil, nil
	clear(batch)
	p.batchBuf = batch[:0]
	p.flushing = false
}
