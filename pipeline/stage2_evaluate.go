package pipeline

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/writ-dev/writ/kv"
)

// Flush takes the queued entries whose key latches are free, evaluates them
// in one Evaluator call, guards the results and proposes them as one batch.
// The background loop calls it; in Manual mode the driver does.
func (p *Pipeline) Flush(ctx context.Context) {
	p.mu.Lock()
	if p.flushing || p.log == nil || !p.started {
		p.mu.Unlock()
		return
	}
	p.flushing = true
	var now time.Time // read once, when an entry backs off
	batch := p.batchBuf[:0]
	bytes := 0
	clear(p.blocked)
	rest := p.queue[:0]
	for _, e := range p.queue {
		if e == nil || e.finished {
			continue
		}
		nb := e.notBefore()
		if !nb.IsZero() && now.IsZero() {
			now = p.clock.Now()
		}
		if now.Before(nb) {
			// Backing off: it does not hold up later entries on its keys
			// (their order does not matter; guards and CAS decide).
			rest = append(rest, e)
			continue
		}
		full := len(batch) >= p.cfg.MaxBatch || (len(batch) > 0 && bytes+len(e.json) > p.cfg.MaxBatchBytes)
		if full || !p.latchLocked(e) {
			// Keep per-key FIFO: later entries on these keys wait too.
			for _, k := range e.keys {
				p.blocked[k] = true
			}
			rest = append(rest, e)
			continue
		}
		e.queued = false
		e.inFlush = true
		bytes += len(e.json)
		batch = append(batch, e)
	}
	clear(p.queue[len(rest):])
	p.queue = rest
	log := p.log
	p.mu.Unlock()

	if len(batch) > 0 {
		p.process(ctx, log, batch) // ends the flush under its final lock
		return
	}
	p.mu.Lock()
	p.batchBuf = batch[:0]
	p.flushing = false
	p.mu.Unlock()
}

func (p *Pipeline) latchLocked(e *entry) bool {
	blocked := len(p.blocked) > 0
	for _, k := range e.keys {
		if h := p.latches[k]; (h != nil && h != e) || (blocked && p.blocked[k]) {
			p.mlatch(e)
			return false
		}
	}
	for _, k := range e.keys {
		p.latches[k] = e
	}
	e.held = true
	return true
}

func (p *Pipeline) unlatchLocked(e *entry) {
	if !e.held {
		return
	}
	for _, k := range e.keys {
		if p.latches[k] == e {
			delete(p.latches, k)
		}
	}
	e.held = false
	e.provisional = kv.Effect{}
}

func (p *Pipeline) process(ctx context.Context, log Log, batch []*entry) {
	items, evalIdx := p.itemsBuf[:0], p.idxBuf[:0]
	// The batch's commands under construction; when every entry proposes
	// (the usual case) this is the proposed batch itself.
	arena := make([]kv.Command, len(batch))
	p.flushLen = len(batch)
	for i, e := range batch {
		e.plan, e.planOut = planNone, nil
		e.cmd = &arena[i]
		if e.kind == kindConfig {
			p.planConfig(ctx, log, e)
			continue
		}
		if e.resolveKey() != "" {
			p.planResolve(ctx, log, e)
			continue
		}
		if ro := e.recordOnly(); ro != "" {
			*e.cmd = p.baseCmd(e, VerdictReject, guardInfo{Reason: ro})
			e.plan = planPropose
			continue
		}
		if p.planRecorded(log, e) {
			continue
		}
		if err := p.readState(ctx, log, e); err != nil {
			e.plan, e.planOut = planRetry, &Outcome{Status: StatusUnavailable, Reason: "reading state: " + err.Error()}
			continue
		}
		own, hasOwn := p.ownTransition(e)
		if hasOwn {
			e.verdict = own.Verdict
			switch own.Verdict {
			case VerdictApply:
			case VerdictDuplicate, VerdictStale:
				if p.cfg.Trace != nil {
					p.traceLocked("guard", e, 0, own.Verdict.String())
				}
				*e.cmd = p.baseCmd(e, own.Verdict, guardInfo{Transitions: []guardTransition{own}})
				if w, ok := recordWrite(&own); ok { // a newer order for the current state advances it
					e.cmd.Effect.Writes = []kv.Write{w}
				}
				e.plan = planPropose
				continue
			case VerdictReject:
				_, reason := p.decideOwn(e)
				p.traceLocked("guard", e, 0, "reject: "+reason)
				p.rejectConfirmed(ctx, log, e, reason)
				continue
			case VerdictQuarantine:
				_, reason := p.decideOwn(e)
				p.traceLocked("guard", e, 0, "quarantine: "+reason)
				p.quarantinePlan(ctx, log, e, own, reason)
				continue
			}
		}
		evalIdx = append(evalIdx, i)
		items = append(items, EvalItem{Type: e.typ, ID: e.userID, Payload: e.json, State: p.handlerState(e)})
		p.ownBuf = append(p.ownBuf, ownScratch{t: own, ok: hasOwn})
	}
	if len(items) > 0 {
		for _, i := range evalIdx {
			p.traceLocked("evaluate", batch[i], 0, "")
		}
		t0 := p.mstart()
		results, err := p.eval.Evaluate(ctx, items)
		p.mbatch(stageEvaluate, t0, batch)
		if err == nil && len(results) != len(items) {
			err = fmt.Errorf("evaluator returned %d results for %d items", len(results), len(items))
		}
		if err == nil {
			// One allocation for the writes of every command the batch
			// builds (handler writes plus machine records).
			n := 0
			for j := range results {
				n += len(results[j].Effect.Writes) + 1 + len(results[j].Transitions)
			}
			p.writeArena = make([]kv.Write, 0, n)
		}
		for j, i := range evalIdx {
			e := batch[i]
			if err != nil {
				e.plan, e.planOut = planRetry, &Outcome{Status: StatusUnavailable, Reason: "handler unavailable: " + err.Error()}
				continue
			}
			var own *guardTransition
			if p.ownBuf[j].ok {
				own = &p.ownBuf[j].t
			}
			p.applyResult(ctx, log, e, &results[j], own)
		}
	}
	nprop := 0
	for _, e := range batch {
		if e.plan == planPropose {
			nprop++
		}
	}
	var cmds []kv.Command
	if nprop == len(batch) {
		cmds = arena
	} else if nprop > 0 {
		cmds = make([]kv.Command, 0, nprop)
		for _, e := range batch {
			if e.plan == planPropose {
				cmds = append(cmds, *e.cmd)
			}
		}
	}
	var prop kv.Proposal
	var perr error
	if len(cmds) > 0 {
		t0 := p.mstart()
		prop, perr = log.Propose(ctx, cmds)
		p.mbatch(stageAppend, t0, batch)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var now time.Time // read when first needed
	var proposed []*entry
	await := prop != nil && !p.cfg.Manual
	for _, e := range batch {
		e.inFlush = false
		switch e.plan {
		case planPropose:
			if perr != nil {
				definite := errors.Is(perr, kv.ErrNoLeader) || errors.Is(perr, kv.ErrDropped)
				p.trace("propose", e, 0, "error: "+perr.Error())
				if definite || e.kind == kindFact || e.kind == kindConfig {
					p.retryLocked(e, Outcome{Status: StatusUnavailable, Reason: "not appended: " + perr.Error()})
				} else {
					p.timeoutLocked(e, "propose failed with an unknown outcome: "+perr.Error())
				}
				continue
			}
			e.proposed = true
			if e.receiptItem && !canaryReceiptDropped {
				if now.IsZero() {
					now = p.clock.Now()
				}
				p.armReceiptItemLocked(e, now)
			}
			if e.kind != kindRequest {
				// facts and config decisions are proposed again when
				// unconfirmed for a while (tick); requests have a deadline
				if now.IsZero() {
					now = p.clock.Now()
				}
				t := e.timing()
				t.proposedAt = now
				t.proposals++
			}
			e.provisional = e.cmd.Effect
			p.live[e.cmdID] = e
			if e.cmd.ID != e.cmdID {
				e.extra().altID = e.cmd.ID
				p.live[e.cmd.ID] = e
			}
			if p.cfg.Trace != nil {
				p.trace("propose", e, 0, fmt.Sprintf("attempt=%d writes=%d verdict=%s", e.attempt, len(e.cmd.Effect.Writes), Verdict(e.cmd.Verdict)))
			}
			if await {
				proposed = append(proposed, e)
			}
			if canaryReplyBeforeCommit && e.kind == kindRequest {
				p.finishLocked(e, Outcome{Status: StatusCommitted}) // canary build: reply at propose
			}
		case planFinish:
			p.finishLocked(e, *e.planOut)
		case planIdentity:
			if idx := e.planOut.Index; idx > p.applied && idx > log.Status().Applied {
				// The log's outcome table is ahead of this node's apply
				// notifications: do not reply before the apply (W1).
				p.unlatchLocked(e)
				if now.IsZero() {
					now = p.clock.Now()
				}
				e.timing().notBefore = now.Add(time.Millisecond)
				p.enqueueLocked(e, true)
				continue
			}
			if e.kind == kindFact {
				p.factDoneLocked(e, e.planOut.Index, "already applied")
				continue
			}
			if e.receiptItem {
				p.receiptItemAgainLocked(e) // no apply carries its outcome now
			}
			p.finishLocked(e, *e.planOut)
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
	if await && !p.stopped {
		p.awaitWG.Add(1)
		go p.await(p.runCtx, prop, proposed, cmds)
	}
	// End the flush: its scratch is free for the next one.
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

func (p *Pipeline) readState(ctx context.Context, log Log, e *entry) error {
	if cap(p.stateArena)-len(p.stateArena) < len(e.keys) {
		p.stateArena = make([]kv.Record, 0, max(256, 2*len(e.keys)))
	}
	n := len(p.stateArena)
	p.stateArena = p.stateArena[:n+len(e.keys)]
	st := p.stateArena[n : n+len(e.keys) : n+len(e.keys)]
	if sr, ok := log.(StateReader); ok {
		if err := sr.GetMany(ctx, e.keys, st); err != nil {
			return err
		}
		e.state = st
		return nil
	}
	for i, k := range e.keys {
		rec, ok, err := log.Get(ctx, k, false)
		if err != nil {
			return err
		}
		if !ok {
			rec = kv.Record{Key: k}
		}
		st[i] = rec
	}
	e.state = st
	return nil
}

// handlerState is what the handler sees: every touched key except the
// conflict record.
func (p *Pipeline) handlerState(e *entry) []kv.Record {
	n := 0
	for _, r := range e.state {
		if !strings.HasPrefix(r.Key, ConflictPrefix) {
			n++
		}
	}
	if n == len(e.state) {
		return e.state
	}
	out := make([]kv.Record, 0, n)
	for _, r := range e.state {
		if !strings.HasPrefix(r.Key, ConflictPrefix) {
			out = append(out, r)
		}
	}
	return out
}

func (p *Pipeline) machineState(e *entry) (MachineRecord, bool, uint64, error) {
	rec, _ := e.stateOf(e.mkey)
	if rec.Rev == 0 {
		return MachineRecord{}, false, 0, nil
	}
	mr, err := parseMachineRecord(rec.Value, e.machine)
	return mr, true, rec.Rev, err
}

// ownTransition guards the entry's own transition (the `to` field).
func (p *Pipeline) ownTransition(e *entry) (guardTransition, bool) {
	if e.machine == nil || e.inst == "" {
		return guardTransition{}, false
	}
	to := e.payload.TargetState()
	if to == "" {
		return guardTransition{}, false
	}
	cur, exists, rev, err := p.machineState(e)
	in := incomingOf(e)
	v := illegalVerdict(e.class) // as decideOwn: an unreadable record is illegal
	if err == nil {
		v, _ = decide(e.machine, cur, exists, in, v, false)
	}
	return newGuardTransition(e.machine.Name, e.inst, rev, cur, exists, in, v), true
}

func (p *Pipeline) decideOwn(e *entry) (Verdict, string) {
	cur, exists, _, err := p.machineState(e)
	if err != nil {
		return illegalVerdict(e.class), err.Error()
	}
	return DecideIncoming(e.machine, cur, exists, incomingOf(e), illegalVerdict(e.class))
}
