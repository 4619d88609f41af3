package pipeline

import (
	"context"
	"fmt"
	"strings"

	"github.com/writ-dev/writ/kv"
)

func (p *Pipeline) baseCmd(e *entry, v Verdict, g guardInfo) kv.Command {
	return p.baseCmdBuf(e, v, g, make([]byte, 0, g.size()))
}

// baseCmdBuf is baseCmd with the guard appended to buf (sized by g.size()).
func (p *Pipeline) baseCmdBuf(e *entry, v Verdict, g guardInfo, buf []byte) kv.Command {
	e.attempt = p.attempts.Add(1)
	g.Attempt = e.attempt
	guard := g.appendTo(buf[:0])
	return kv.Command{ID: e.cmdID, Type: e.typ, Class: uint8(e.class), Key: e.inst, Verdict: uint8(v),
		Guard: guard[:len(guard):len(guard)], Payload: e.json, Origin: p.cfg.NodeID}
}

func (p *Pipeline) rejectPlan(e *entry, reason string) {
	if e.receiptItem {
		// Nobody waits for a receipt item: record the rejection in the log
		// so the watch stream carries it (W4).
		e.extra().recordOnly = reason
		*e.cmd = p.baseCmd(e, VerdictReject, guardInfo{Reason: reason})
		e.plan = planPropose
		return
	}
	e.plan, e.planOut = planFinish, &Outcome{Status: StatusRejected, Reason: reason, Verdict: VerdictReject}
}

// rejectConfirmed rejects a request only after a linearizable re-read shows
// that the state the rejection was based on is current: a node whose applied
// state lags the log must not answer REJECTED from stale state. If a key
// moved, the entry is evaluated again.
func (p *Pipeline) rejectConfirmed(ctx context.Context, log Log, e *entry, reason string) {
	for i, r := range e.state {
		cur, ok, err := log.Get(ctx, r.Key, i == 0)
		if err != nil {
			e.plan, e.planOut = planRetry, &Outcome{Status: StatusUnavailable, Reason: "cannot confirm the rejection against current state: " + err.Error()}
			return
		}
		if !ok {
			cur.Rev = 0
		}
		if cur.Rev != r.Rev {
			e.conflicts++
			if int(e.conflicts) > p.cfg.MaxConflicts {
				e.plan, e.planOut = planRetry, &Outcome{Status: StatusUnavailable, Reason: "state kept moving while confirming a rejection"}
				return
			}
			p.traceLocked("requeue", e, 0, "rejection not confirmed: "+r.Key+" is behind; re-evaluate")
			e.plan = planRequeue
			return
		}
	}
	p.rejectPlan(e, reason)
}

// applyResult turns a handler result into a command (evaluate → guard).
// own is the entry's own transition as guarded before evaluation (nil when
// it has none); the state it was decided on is still e.state.
func (p *Pipeline) applyResult(ctx context.Context, log Log, e *entry, r *EvalResult, own *guardTransition) {
	if r.Err != nil {
		p.evalErrorPlan(ctx, log, e, r.Err, own)
		return
	}
	if len(r.NeedKeys) > 0 {
		p.needKeysPlan(e, r.NeedKeys)
		return
	}
	if own != nil && own.Verdict == VerdictApply && handlerIgnored(r) {
		p.declinedPlan(ctx, log, e, own, ignoredReason(own))
		return
	}
	writes, ok := p.handlerWrites(e, r)
	if !ok {
		return
	}
	// Machine record writes get their values, and the command its guard,
	// from one buffer once every transition is decided.
	var mwBuf [2]int
	mw := mwBuf[:0] // writes[mw[k]] is the record of g.Transitions[mt[k]]
	var mtBuf [2]int
	mt := mtBuf[:0]
	var tbuf [2]guardTransition
	g := guardInfo{Transitions: tbuf[:0]}
	verdict := VerdictNone
	if own != nil {
		if own.Verdict != VerdictApply {
			// state moved under us (cannot happen under latches); retry
			e.plan = planRequeue
			return
		}
		g.Transitions = append(g.Transitions, *own)
		mw, mt = append(mw, len(writes)), append(mt, len(g.Transitions)-1)
		writes = append(writes, kv.Write{Key: e.mkey, IfRev: own.ExpectRev})
		verdict = VerdictApply
	}
	for _, tr := range r.Transitions {
		t, key, ok := p.guardTransitionOf(ctx, log, e, tr)
		if !ok {
			return
		}
		switch t.Verdict {
		case VerdictApply:
			g.Transitions = append(g.Transitions, t)
			mw, mt = append(mw, len(writes)), append(mt, len(g.Transitions)-1)
			writes = append(writes, kv.Write{Key: key, IfRev: t.ExpectRev})
			if verdict == VerdictNone {
				verdict = VerdictApply
			}
		case VerdictDuplicate, VerdictStale:
			g.Transitions = append(g.Transitions, t)
		}
	}
	p.commandPlan(e, r, verdict, g, writes, mw, mt)
}

// evalErrorPlan plans an entry whose handler returned an error: transient
// errors retry, an internal error rejects a request (a fact retries), and
// a refusal is one decision (decision.go).
func (p *Pipeline) evalErrorPlan(ctx context.Context, log Log, e *entry, rerr *EvalError, own *guardTransition) {
	switch rerr.Kind {
	case EvalUnavailable:
		e.plan, e.planOut = planRetry, &Outcome{Status: StatusUnavailable, Reason: rerr.Error()}
	case EvalInternal:
		if e.kind == kindFact {
			e.plan, e.planOut = planRetry, &Outcome{Status: StatusUnavailable, Reason: rerr.Error()}
		} else {
			p.rejectPlan(e, "handler internal error: "+rerr.Msg)
		}
	default:
		// One decision (decision.go): a refused entry moves no
		// machine; a refused fact is quarantined, and retained.
		p.declinedPlan(ctx, log, e, own, rerr.Msg)
	}
}

// maxKeyRounds bounds the NeedKeys rounds of one evaluation.
const maxKeyRounds = 4

// needKeysPlan evaluates the entry again with the keys the handler asked
// for, at most maxKeyRounds times in a row. The count is of one decision
// (settleLocked resets it): a fact evaluated again after a failed
// precondition may need more keys than before, as a holder that lost its
// session may hold more leases by then. A handler that keeps asking within
// one decision is broken: a request is rejected, and a fact is retried
// with backoff, retained as every fact is until it commits (W3).
func (p *Pipeline) needKeysPlan(e *entry, need []string) {
	if e.rounds >= maxKeyRounds {
		p.handlerBroke(e, fmt.Sprintf("handler asked for more keys %d times in a row (last: %q)", maxKeyRounds+1, need))
		return
	}
	e.rounds++
	for _, k := range need {
		if _, ok := e.stateOf(k); !ok {
			e.keys = append(e.keys, k)
		}
	}
	e.plan = planRequeue
}

// handlerWrites checks the handler's writes and gives each the revision it
// was evaluated on as precondition; ok is false when the entry's plan is
// set (a malformed write). The slice has room for the machine records.
func (p *Pipeline) handlerWrites(e *entry, r *EvalResult) (writes []kv.Write, ok bool) {
	need := len(r.Effect.Writes) + 1 + len(r.Transitions)
	if n := len(p.writeArena); cap(p.writeArena)-n >= need {
		writes = p.writeArena[n : n : n+need]
		p.writeArena = p.writeArena[:n+need]
	} else {
		writes = make([]kv.Write, 0, need)
	}
	for _, w := range r.Effect.Writes {
		if w.Key == "" || len(w.Key) > MaxKeyBytes {
			p.handlerBroke(e, fmt.Sprintf("handler wrote a key of %d bytes (1..%d allowed)", len(w.Key), MaxKeyBytes))
			return nil, false
		}
		if strings.HasPrefix(w.Key, "_") {
			p.handlerBroke(e, fmt.Sprintf("handler wrote reserved key %q (keys starting with _ belong to writ)", w.Key))
			return nil, false
		}
		w.Unconditional = false
		if rec, ok := e.stateOf(w.Key); ok {
			w.IfRev = rec.Rev
		}
		writes = append(writes, w)
	}
	return writes, true
}

// guardTransitionOf guards a transition the handler returned against the
// machine record's current state. ok is false when the entry's plan is set
// instead (undeclared machine, unreadable state, a rejected or quarantined
// transition).
func (p *Pipeline) guardTransitionOf(ctx context.Context, log Log, e *entry, tr Transition) (t guardTransition, key string, ok bool) {
	m, ok := p.cat.Machine(tr.Machine)
	if !ok {
		p.handlerBroke(e, fmt.Sprintf("handler transition names undeclared machine %q", tr.Machine))
		return t, "", false
	}
	key = MachineKey(tr.Machine, tr.Key)
	rec, ok := e.stateOf(key)
	if !ok {
		var found bool
		var err error
		rec, found, err = log.Get(ctx, key, false)
		if err != nil {
			e.plan, e.planOut = planRetry, &Outcome{Status: StatusUnavailable, Reason: "reading state: " + err.Error()}
			return t, "", false
		}
		if !found {
			rec = kv.Record{Key: key}
		}
	}
	var cur MachineRecord
	exists := rec.Rev != 0
	if exists {
		var err error
		if cur, err = ParseMachineRecord(rec.Value); err != nil {
			p.handlerBroke(e, err.Error())
			return t, "", false
		}
	}
	v, reason := Decide(m, cur, exists, tr.To, 0, false, illegalVerdict(e.class))
	t = newGuardTransition(tr.Machine, tr.Key, rec.Rev, cur, exists, Incoming{To: tr.To}, v)
	switch v {
	case VerdictReject:
		p.traceLocked("guard", e, 0, "reject transition: "+reason)
		p.rejectConfirmed(ctx, log, e, reason)
		return t, "", false
	case VerdictQuarantine:
		p.traceLocked("guard", e, 0, "quarantine transition: "+reason)
		p.quarantinePlan(ctx, log, e, t, reason)
		return t, "", false
	}
	return t, key, true
}

// commandPlan builds the evaluated entry's command: the handler's writes,
// the machine records writes[mw[k]] of the applied transitions
// g.Transitions[mt[k]], and the guard, from one buffer of the flush.
func (p *Pipeline) commandPlan(e *entry, r *EvalResult, verdict Verdict, g guardInfo, writes []kv.Write, mw, mt []int) {
	if p.cfg.Trace != nil {
		p.traceLocked("guard", e, 0, verdict.String())
	}
	size := g.size()
	for _, ti := range mt {
		size += machineRecordSize(&g.Transitions[ti])
	}
	buf := p.flushBytes(size)
	for k, wi := range mw {
		start := len(buf)
		buf = nextMachineRecord(&g.Transitions[mt[k]]).AppendJSON(buf)
		writes[wi].Value = buf[start:len(buf):len(buf)]
	}
	*e.cmd = p.baseCmdBuf(e, verdict, g, buf[len(buf):])
	e.cmd.Effect.Writes = writes
	e.result = r.Result
	e.plan = planPropose
}

// flushBytes returns an empty buffer with room for n bytes, carved from
// the flush's byte arena (machine record values and guards of the commands
// it builds). Appending beyond n moves to a new array, as append does.
func (p *Pipeline) flushBytes(n int) []byte {
	if cap(p.byteArena)-len(p.byteArena) < n {
		p.byteArena = make([]byte, 0, max(n, min(p.flushLen*128, 64<<10)))
	}
	off := len(p.byteArena)
	p.byteArena = p.byteArena[:off+n]
	return p.byteArena[off : off : off+n]
}

func (p *Pipeline) handlerBroke(e *entry, msg string) {
	p.lg.Error("pipeline: handler returned a malformed result", "type", e.typ, "id", e.userID, "err", msg)
	if e.kind == kindFact {
		e.plan, e.planOut = planRetry, &Outcome{Status: StatusUnavailable, Reason: msg}
		return
	}
	p.rejectPlan(e, "handler internal error: "+msg)
}

func machineWrite(t guardTransition) kv.Write {
	return kv.Write{Key: MachineKey(t.Machine, t.Instance), Value: nextMachineRecord(&t).AppendJSON(nil), IfRev: t.ExpectRev}
}

// machineRecordSize bounds the encoding of the record t writes (quoting
// unusual state names can exceed it; append then grows the buffer).
func machineRecordSize(t *guardTransition) int {
	return len(`{"state":"","order":}`) + len(t.To) + 20
}
