package pipeline

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/writ-dev/writ/kv"
)

// await completes entries from the proposal's own wait (the observer does
// the same; whichever comes first wins).
func (p *Pipeline) await(ctx context.Context, prop kv.Proposal, entries []*entry, cmds []kv.Command) {
	defer p.awaitWG.Done()
	ctx, cancel := context.WithTimeout(ctx, p.cfg.CommitTimeout+p.cfg.ConfigTimeout)
	defer cancel()
	t0 := p.mstart()
	res, err := prop.Wait(ctx)
	p.mstage(stageCommitWait, t0)
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		if errors.Is(err, kv.ErrDropped) || errors.Is(err, kv.ErrNoLeader) {
			for _, e := range entries {
				if e.proposed && !e.finished {
					e.proposed = false
					p.retryLocked(e, Outcome{Status: StatusUnavailable, Reason: "not appended: " + err.Error()})
				}
			}
		}
		return
	}
	if len(res) != len(cmds) {
		return
	}
	for i := range cmds {
		// Only an entry of this proposal: once it was answered (by the
		// observer, which hears of the batch first), a retry with the same
		// ID may already hold the ID's live slot; that retry is answered
		// by its own evaluation (a duplicate), not by this proposal.
		if e := p.live[cmds[i].ID]; e != nil && proposedIn(entries, i, e) {
			p.resolveLocked(e, &cmds[i], res[i])
		}
	}
}

// retryLocked handles a transient failure: requests answer UNAVAILABLE
// (definitely not applied); facts and config decisions back off and retry.
func (p *Pipeline) retryLocked(e *entry, out Outcome) {
	p.unlatchLocked(e)
	e.proposed = false
	if e.kind == kindRequest {
		switch {
		case e.everApplied:
			out = Outcome{Status: StatusUncertain, Reason: out.Reason}
		case e.mayCommit:
			p.uncertainLocked(e, out.Reason+" (an earlier proposal, under another leader)")
			return
		}
		p.finishLocked(e, out)
		return
	}
	t := e.timing()
	d := p.retry.Next(&t.backoff)
	t.notBefore = p.clock.Now().Add(d)
	p.trace("retry", e, 0, fmt.Sprintf("in %s: %s", d, out.Reason))
	p.enqueueLocked(e, false)
}

// proposedIn reports whether e is one of a proposal's entries; entries[i]
// is usually the one that proposed command i.
func proposedIn(entries []*entry, i int, e *entry) bool {
	if i < len(entries) && entries[i] == e {
		return true
	}
	return slices.Contains(entries, e)
}

// timeoutLocked ends a request's wait: UNCERTAIN if a proposal may still
// commit (provisional state rolled back), else UNAVAILABLE.
func (p *Pipeline) timeoutLocked(e *entry, why string) {
	if e.replied {
		return
	}
	if e.inFlush {
		e.extra().timeoutWhy = why
		return
	}
	switch e.kind {
	case kindFact:
		return
	case kindConfig:
		p.configTimeoutLocked(e, why)
		return
	}
	if e.proposed || e.mayCommit {
		p.uncertainLocked(e, why)
		return
	}
	p.finishLocked(e, Outcome{Status: StatusUnavailable, Reason: why + "; not appended"})
}

// uncertainLocked answers a request UNCERTAIN: a proposal of it may still
// commit. Its provisional effect is dropped and a fence is proposed, so
// that its outcome becomes definite.
func (p *Pipeline) uncertainLocked(e *entry, why string) {
	if len(p.uncert) >= p.cfg.OutcomeCache {
		for k := range p.uncert { // bounded: forget an arbitrary old one
			delete(p.uncert, k)
			break
		}
	}
	p.uncert[e.cmdID] = e.attempt
	p.trace("rollback", e, 0, "provisional effect dropped")
	p.finishLocked(e, Outcome{Status: StatusUncertain, Reason: why + "; the entry may still commit: query the outcome by request ID or retry with the same ID"})
	p.fenceLocked(e.cmdID, e.typ)
}

// Tick enforces timeouts: requests past their deadline, fact proposals that
// were not confirmed (re-proposed), config changes to abort. The background
// loop calls it; in Manual mode the driver does.
func (p *Pipeline) Tick() {
	p.tick()
}

// tick enforces timeouts.
func (p *Pipeline) tick() {
	var fences []string
	defer func() { p.proposeFences(fences) }() // after the unlock
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.clock.Now()
	var expired []*entry
	seen := map[*entry]bool{}
	for _, e := range p.live {
		if e.finished || seen[e] {
			continue
		}
		seen[e] = true
		// facts, and config decisions already answered UNCERTAIN, have no
		// deadline: an unconfirmed proposal is simply proposed again
		noDeadline := e.kind == kindFact || (e.kind == kindConfig && e.replied)
		switch {
		case noDeadline && e.proposed && !now.Before(e.timing().proposedAt.Add(p.cfg.CommitTimeout)):
			expired = append(expired, e)
		case e.kind != kindFact && e.deadline != 0 && now.Sub(p.epoch) >= e.deadline:
			expired = append(expired, e)
		}
	}
	// In ID order, not the map's: the fences and retries below are
	// proposed in this order, and a deterministic driver (robustness/sim)
	// must see the same order on every run.
	slices.SortFunc(expired, func(a, b *entry) int { return strings.Compare(a.cmdID, b.cmdID) })
	for _, e := range expired {
		if e.kind == kindFact || (e.kind == kindConfig && e.replied) {
			p.trace("timeout", e, 0, "re-propose")
			p.retryLocked(e, Outcome{Reason: "not confirmed within the commit timeout"})
			continue
		}
		p.timeoutLocked(e, "commit timeout")
	}
	p.leaderChangeLocked(now)
	fences = p.dueFencesLocked(now)
	if len(p.queue) > 0 {
		p.wakeup()
	}
}

// Applied is the kv.ApplyObserver: it completes waits, records outcomes and
// feeds the watch stream, in log order.
func (p *Pipeline) Applied(index uint64, batch []kv.Command, results []kv.Result) {
	n := min(len(batch), len(results))
	var hooks []ConfigActivation
	p.mu.Lock()
	if index > p.applied {
		p.applied = index
	}
	if p.ring.first == 0 {
		p.ring.first = index
	}
	// the live entries of the first commands, looked up once for both
	// loops (the second looks up again after hooks ran unlocked)
	var liveBuf [16]*entry
	for i := 0; i < n; i++ {
		cmd, res := &batch[i], results[i]
		if res.Index == 0 {
			res.Index = index
		}
		e := p.live[cmd.ID]
		if i < len(liveBuf) {
			liveBuf[i] = e
		}
		p.observeLocked(cmd, res, i, e != nil)
		p.settleFenceLocked(cmd, res)
		if cmd.Type == typeConfigActivate && res.Status == kv.StatusApplied && p.cfg.OnConfigActivated != nil {
			if a, ok := activationOf(cmd, res.Index); ok {
				hooks = append(hooks, a)
			}
		}
	}
	if len(hooks) > 0 {
		// The reload hook runs before the requester is answered, so a
		// COMMITTED configuration change has been reloaded on this node.
		p.mu.Unlock()
		for _, h := range hooks {
			p.reload(h)
		}
		p.mu.Lock()
	}
	p.reloadedThroughLocked(index)
	for i := 0; i < n; i++ {
		cmd, res := &batch[i], results[i]
		if res.Index == 0 {
			res.Index = index
		}
		var e *entry
		if i < len(liveBuf) && len(hooks) == 0 {
			e = liveBuf[i]
		} else {
			e = p.live[cmd.ID]
		}
		if e != nil {
			p.resolveLocked(e, cmd, res)
		} else if att, ok := p.uncert[cmd.ID]; ok {
			p.resolveUncertainLocked(cmd, res, att)
		}
	}
	p.ring.wake()
	p.mu.Unlock()
}

// Restored implements kv.RestoreObserver. The log calls it when it opens
// (the state it loaded from disk) and after installing a snapshot: the
// entries up to index were committed and applied here without being
// observed one by one. The watch ring cannot show them, so it drops what it
// retains and marks index+1 as its first position: a watcher positioned
// before that gets ErrCompacted (re-read state and watch on) instead of a
// feed with a silent hole. Requests waiting on their proposals are settled
// by the log from the snapshot's outcome table; facts whose proposal is
// unconfirmed are looked up at once rather than at the next tick.
func (p *Pipeline) Restored(index uint64) {
	p.mu.Lock()
	if index > p.applied {
		p.applied = index
	}
	if r := &p.ring; index+1 > r.first {
		r.head, r.n, r.first = 0, 0, index+1
	}
	var check []string
	seen := map[*entry]bool{}
	for _, e := range p.live {
		if e.kind == kindFact && e.proposed && !e.inFlush && !e.finished && !seen[e] {
			seen[e] = true
			check = append(check, e.cmdID)
		}
	}
	p.ring.wake()
	started := p.log != nil && p.started
	p.mu.Unlock()
	if started {
		p.lg.Info("pipeline: state restored from a snapshot; watchers before it must re-read state", "index", index)
	}
	p.reloadRestored(index, started)
	if started && len(check) > 0 {
		p.confirmFacts(check)
	}
}

var _ kv.RestoreObserver = (*Pipeline)(nil)

// observeLocked records a committed command on the watch ring and, for a
// request or config command no live entry here waits for, its outcome.
func (p *Pipeline) observeLocked(cmd *kv.Command, res kv.Result, pos int, live bool) {
	ev, ok := eventOf(cmd, res, pos)
	if !ok {
		return
	}
	p.ring.add(ev)
	if strings.HasPrefix(cmd.ID, "req:") || strings.HasPrefix(cmd.ID, "cfg:") {
		if !live {
			if canaryOutcomeStaleCache {
				if _, held := p.outcomes.get(cmd.ID); held {
					return // canary build: what the cache holds is never refreshed
				}
			}
			o := Outcome{ID: strings.TrimPrefix(cmd.ID, "req:"), Type: cmd.Type, Status: ev.Status, Index: res.Index,
				Verdict: ev.Verdict, Duplicate: ev.Duplicate, Reason: ev.Reason}
			if ev.Duplicate || res.Status == kv.StatusFenced {
				o.Index = res.FirstIndex
				if prev, ok := p.outcomes.get(cmd.ID); ok && prev.Status == StatusCommitted {
					return
				}
			}
			p.outcomes.put(cmd.ID, o)
		}
	}
}

func (p *Pipeline) resolveUncertainLocked(cmd *kv.Command, res kv.Result, att uint64) {
	switch res.Status {
	case kv.StatusApplied, kv.StatusDuplicate, kv.StatusFenced:
		delete(p.uncert, cmd.ID)
		// observeLocked recorded the outcome already.
	default:
		if cmd.Origin == p.cfg.NodeID && guardAttempt(cmd.Guard) == att {
			delete(p.uncert, cmd.ID)
			p.outcomes.put(cmd.ID, Outcome{ID: strings.TrimPrefix(cmd.ID, "req:"), Type: cmd.Type, Status: StatusUnavailable,
				Reason: "the uncertain proposal did not apply (" + res.Status.String() + ": " + res.Reason + "); retry with the same request ID is safe"})
		}
	}
}

// resolveLocked handles the apply result of a command for a live entry.
func (p *Pipeline) resolveLocked(e *entry, cmd *kv.Command, res kv.Result) {
	if e.finished {
		return
	}
	if e.inFlush {
		// An earlier proposal's result while a new one is being built:
		// only an application matters (it completes the entry).
		if definite(res.Status) {
			e.extra().late = &lateResult{cmd: *cmd, res: res}
		}
		return
	}
	if e.kind == kindConfig {
		p.resolveConfigLocked(e, cmd, res)
		return
	}
	switch res.Status {
	case kv.StatusFenced:
		p.fencedLocked(e, res)
		return
	case kv.StatusApplied, kv.StatusDuplicate:
		if p.reusedAppliedLocked(e, cmd, res) {
			return
		}
		e.everApplied = true
		idx := res.Index
		if res.Status == kv.StatusDuplicate && res.FirstIndex != 0 {
			idx = res.FirstIndex
		}
		if p.cfg.Trace != nil {
			p.trace("apply", e, res.Index, res.Status.String())
		}
		if e.kind == kindFact {
			p.factDoneLocked(e, res.Index, "done")
			return
		}
		// Duplicate: this submission is not the one that applied the ID
		// (an earlier application, or another node's attempt with the same
		// ID that applied first while this one was in flight).
		dup := res.Status == kv.StatusDuplicate || cmd.Origin != p.cfg.NodeID
		out := Outcome{Status: StatusCommitted, Index: idx, Result: e.result, Verdict: Verdict(cmd.Verdict), Duplicate: dup}
		if Verdict(cmd.Verdict) == VerdictReject {
			g, _ := decodeGuard(cmd.Guard)
			out = Outcome{Status: StatusRejected, Index: idx, Verdict: VerdictReject, Reason: g.Reason}
		}
		p.finishLocked(e, out)
		return
	}
	if cmd.Origin != p.cfg.NodeID || guardAttempt(cmd.Guard) != e.attempt || !e.proposed {
		return
	}
	e.proposed = false
	p.trace("apply", e, res.Index, res.Status.String()+": "+res.Reason)
	if res.Status == kv.StatusConflict || strings.Contains(res.Reason, errGuardMovedText) {
		p.movedLocked(e, res)
		return
	}
	// A deterministic veto by the apply-time guard.
	if e.kind == kindFact {
		p.lg.Error("pipeline: fact vetoed at apply; it is retained in the log as rejected", "id", e.cmdID, "reason", res.Reason)
		p.factDoneLocked(e, res.Index, "vetoed at apply, retained in the log")
		return
	}
	p.finishLocked(e, Outcome{Status: StatusRejected, Index: res.Index, Reason: res.Reason})
}

// movedLocked handles an entry whose proposal failed a precondition (the
// state moved since it was evaluated): it is evaluated again now. A request
// gives up with UNAVAILABLE after MaxConflicts of them.
func (p *Pipeline) movedLocked(e *entry, res kv.Result) {
	if e.kind == kindFact {
		// The log works and the state moved: re-evaluate against it now.
		// A fact never gives up, so conflicts do not grow its backoff;
		// under sustained contention it only yields RetryMin to the other
		// writers once every MaxConflicts attempts.
		e.conflicts++
		e.timing().backoff = 0
		p.unlatchLocked(e)
		if int(e.conflicts) >= p.cfg.MaxConflicts {
			e.conflicts = 0
			e.t.notBefore = p.clock.Now().Add(p.cfg.RetryMin)
			p.trace("requeue", e, res.Index, fmt.Sprintf("re-evaluate in %s (contention)", p.cfg.RetryMin))
			p.enqueueLocked(e, false)
		} else {
			p.trace("requeue", e, res.Index, "re-evaluate against new state")
			p.enqueueLocked(e, true)
		}
		p.wakeup()
		return
	}
	e.conflicts++
	if int(e.conflicts) > p.cfg.MaxConflicts {
		p.retryLocked(e, Outcome{Status: StatusUnavailable, Reason: fmt.Sprintf("preconditions failed %d times (contention on %s); not applied", e.conflicts, res.Reason)})
		return
	}
	p.unlatchLocked(e)
	p.trace("requeue", e, res.Index, "re-evaluate against new state")
	p.enqueueLocked(e, true)
	p.wakeup()
}
