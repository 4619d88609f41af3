package pipeline

import (
	"context"
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

// process carries one flush's batch, already latched, through the stages
// that follow: evaluate decides each entry's plan and builds the command
// carrying its effect (planEntry, evaluateItems, applyResult), propose
// appends the commands as one batch (proposeBatch, stage3_propose.go), and
// settleLocked hands every entry on by its plan. It ends the flush under
// its final lock.
func (p *Pipeline) process(ctx context.Context, log Log, batch []*entry) {
	items, evalIdx := p.itemsBuf[:0], p.idxBuf[:0]
	// The batch's commands under construction; when every entry proposes
	// (the usual case) this is the proposed batch itself.
	arena := make([]kv.Command, len(batch))
	p.flushLen = len(batch)
	for i, e := range batch {
		e.plan, e.planOut = planNone, nil
		e.cmd = &arena[i]
		own, hasOwn, toHandler := p.planEntry(ctx, log, e)
		if !toHandler {
			continue
		}
		evalIdx = append(evalIdx, i)
		items = append(items, EvalItem{Type: e.typ, ID: e.userID, Payload: e.json, State: p.handlerState(e)})
		p.ownBuf = append(p.ownBuf, ownScratch{t: own, ok: hasOwn})
	}
	if len(items) > 0 {
		p.evaluateItems(ctx, log, batch, items, evalIdx)
	}
	pb := p.proposeBatch(ctx, log, batch, arena)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.settleLocked(log, batch, &pb)
	if pb.await && !p.stopped {
		p.awaitWG.Add(1)
		go p.await(p.runCtx, pb.prop, pb.entries, pb.cmds)
	}
	p.endFlushLocked(batch, items, evalIdx)
}

// planEntry runs the steps before the handler for one entry. Entries that
// need no handler get their plan here: configuration phases, conflict
// resolutions, recorded rejections, entries already applied, and entries
// whose own transition the guard decides alone (duplicate, stale, reject,
// quarantine). toHandler says the entry goes to the evaluator, with own its
// own transition as guarded (hasOwn false when it has none).
func (p *Pipeline) planEntry(ctx context.Context, log Log, e *entry) (own guardTransition, hasOwn, toHandler bool) {
	if e.kind == kindConfig {
		p.planConfig(ctx, log, e)
		return own, false, false
	}
	if e.resolveKey() != "" {
		p.planResolve(ctx, log, e)
		return own, false, false
	}
	if ro := e.recordOnly(); ro != "" {
		*e.cmd = p.baseCmd(e, VerdictReject, guardInfo{Reason: ro})
		e.plan = planPropose
		return own, false, false
	}
	if p.planRecorded(log, e) {
		return own, false, false
	}
	if err := p.readState(ctx, log, e); err != nil {
		e.plan, e.planOut = planRetry, &Outcome{Status: StatusUnavailable, Reason: "reading state: " + err.Error()}
		return own, false, false
	}
	own, hasOwn = p.ownTransition(e)
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
			return own, hasOwn, false
		case VerdictReject:
			_, reason := p.decideOwn(e)
			p.traceLocked("guard", e, 0, "reject: "+reason)
			p.rejectConfirmed(ctx, log, e, reason)
			return own, hasOwn, false
		case VerdictQuarantine:
			_, reason := p.decideOwn(e)
			p.traceLocked("guard", e, 0, "quarantine: "+reason)
			p.quarantinePlan(ctx, log, e, own, reason)
			return own, hasOwn, false
		}
	}
	return own, hasOwn, true
}

// evaluateItems calls the handlers once for the batch's items (batch[i]
// for i in evalIdx) and turns each result into the entry's plan and
// command (applyResult, stage2_effect.go).
func (p *Pipeline) evaluateItems(ctx context.Context, log Log, batch []*entry, items []EvalItem, evalIdx []int) {
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
