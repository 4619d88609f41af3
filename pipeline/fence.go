package pipeline

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/writ-dev/writ/kv"
)

// Fences make UNCERTAIN definite (W2).
//
// A request whose proposal was not confirmed within its commit timeout is
// answered UNCERTAIN: the entry may still commit. The proposer then commits
// a fence for the request's command ID (a kv.TypeFence command with no
// writes). Apply decides, on every replica alike, which came first in the
// log:
//
//   - an attempt with the ID applied before the fence: the fence is a
//     duplicate and changes nothing; the request is COMMITTED;
//   - otherwise the fence records the ID as fenced in the replicated
//     outcome table, and every later command with that ID (the lost
//     proposal arriving late, or a retry) applies as fenced and changes
//     nothing; the request is NOT_COMMITTED, for good.
//
// A retry with a fenced ID is therefore answered NOT_COMMITTED: the ID is
// spent, and the operation must be submitted again with a new request ID.
// The fence is re-proposed (with backoff while there is no leader, after a
// commit timeout when its own proposal was lost) until the table holds a
// definite outcome for the ID. A fence is idempotent: a second one for a
// fenced ID is fenced again, one for an applied ID a duplicate.

// fenceSet is the fences this node still has to see land, and the
// leadership they were last proposed under.
type fenceSet struct {
	m      map[string]*fenceState
	term   uint64
	leader string
}

// fenceState is one fence this node still has to see land.
type fenceState struct {
	typ     string
	retryAt time.Time
	backoff time.Duration
}

// fenceLocked schedules a fence for a request command ID whose proposal
// timed out. Only client request IDs are fenced: an internal command ID
// (a conflict resolution's, say) names a key, not one attempt, and must
// stay usable.
func (p *Pipeline) fenceLocked(cmdID, typ string) {
	if !strings.HasPrefix(cmdID, "req:") {
		return
	}
	if p.fences.m == nil {
		p.fences.m = map[string]*fenceState{}
	}
	if _, ok := p.fences.m[cmdID]; ok {
		return
	}
	if len(p.fences.m) >= p.cfg.OutcomeCache {
		p.lg.Warn("pipeline: too many unsettled uncertain requests; this one stays UNCERTAIN until its outcome is settled by request ID", "id", cmdID)
		return
	}
	p.fences.m[cmdID] = &fenceState{typ: typ}
	p.trace0("fence", cmdID, typ, "scheduled: the proposal was not confirmed within the commit timeout")
}

// fencePending reports whether a fence for cmdID is still to land here.
func (p *Pipeline) fencePendingLocked(cmdID string) bool {
	_, ok := p.fences.m[cmdID]
	return ok
}

// dueFencesLocked returns the fences to propose now and marks them as
// proposed: each is proposed again one commit timeout later unless it
// landed by then, or at once when the log has a new leader (a proposal
// forwarded to a leader that lost its post is silently lost).
func (p *Pipeline) dueFencesLocked(now time.Time) []string {
	if len(p.fences.m) == 0 || p.log == nil {
		return nil
	}
	st := p.log.Status()
	moved := st.Term != p.fences.term || st.LeaderID != p.fences.leader
	p.fences.term, p.fences.leader = st.Term, st.LeaderID
	var due []string
	for id, f := range p.fences.m {
		if now.Before(f.retryAt) && !(moved && hasLeader(st)) {
			continue
		}
		f.retryAt = now.Add(p.cfg.CommitTimeout)
		due = append(due, id)
	}
	slices.Sort(due) // proposed in ID order, not the map's (see tick)
	return due
}

// settleFenceLocked retires a pending fence once the log recorded a
// definite outcome for its ID (the observer calls it for every applied
// command).
func (p *Pipeline) settleFenceLocked(cmd *kv.Command, res kv.Result) {
	if len(p.fences.m) == 0 {
		return
	}
	f, ok := p.fences.m[cmd.ID]
	if !ok || !definite(res.Status) {
		return
	}
	delete(p.fences.m, cmd.ID)
	delete(p.uncert, cmd.ID)
	if res.Status == kv.StatusFenced {
		p.outcomes.put(cmd.ID, fencedOutcome(cmd.ID, f.typ, res))
	}
	p.trace0("fence", cmd.ID, f.typ, "settled: "+res.Status.String())
}

// definite: the outcome table's record for an ID is final.
func definite(s kv.Status) bool {
	return s == kv.StatusApplied || s == kv.StatusDuplicate || s == kv.StatusFenced
}

func fencedOutcome(cmdID, typ string, res kv.Result) Outcome {
	idx := res.FirstIndex
	if idx == 0 {
		idx = res.Index
	}
	return Outcome{ID: userIDOf(cmdID), Type: typ, Status: StatusNotCommitted, Index: idx,
		Reason: fmt.Sprintf("not committed: the request ID was fenced at index %d after its commit timeout; submit again with a new request ID", idx)}
}

func fenceCmd(cmdID, origin string) kv.Command {
	return kv.Command{ID: cmdID, Type: kv.TypeFence, Origin: origin}
}

// proposeFences proposes the due fences (without the lock). A fence whose
// ID already has a definite outcome here is settled without a proposal.
func (p *Pipeline) proposeFences(ids []string) {
	if len(ids) == 0 {
		return
	}
	p.mu.Lock()
	log, ctx, stopped := p.log, p.runCtx, p.stopped
	p.mu.Unlock()
	if log == nil || stopped {
		return
	}
	cmds := make([]kv.Command, 0, len(ids))
	for _, id := range ids {
		if r, ok := log.Outcome(id); ok && definite(r.Status) {
			p.mu.Lock()
			c := kv.Command{ID: id}
			p.settleFenceLocked(&c, r)
			p.mu.Unlock()
			continue
		}
		cmds = append(cmds, fenceCmd(id, p.cfg.NodeID))
	}
	if len(cmds) == 0 {
		return
	}
	pctx := ctx
	if pctx == nil {
		pctx = context.Background()
	}
	prop, err := log.Propose(pctx, cmds)
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		now := p.clock.Now()
		for _, c := range cmds {
			f := p.fences.m[c.ID]
			if f == nil {
				continue
			}
			f.retryAt = now.Add(p.retry.Next(&f.backoff))
		}
		p.trace0("fence", cmds[0].ID, "", fmt.Sprintf("%d fence(s) not proposed, retrying: %v", len(cmds), err))
		return
	}
	for _, c := range cmds {
		if f := p.fences.m[c.ID]; f != nil {
			f.backoff = 0
		}
	}
	p.trace0("fence", cmds[0].ID, "", fmt.Sprintf("%d fence(s) proposed", len(cmds)))
	if ctx == nil || p.stopped {
		// Manual mode: the driver commits; the observer settles.
		return
	}
	// Wait, so that a lost proposal's waiter is released; the observer
	// settles the fences as they apply.
	p.awaitWG.Add(1)
	go func() {
		defer p.awaitWG.Done()
		wctx, cancel := context.WithTimeout(ctx, p.cfg.CommitTimeout)
		defer cancel()
		_, _ = prop.Wait(wctx)
	}()
}

// settle commits a fence for a request ID that has no definite outcome
// and waits until it applied here (OutcomeQuery.Settle).
func (p *Pipeline) settle(ctx context.Context, cmdID string) error {
	p.mu.Lock()
	log := p.log
	p.mu.Unlock()
	if log == nil {
		return fmt.Errorf("pipeline: settle: %w", ErrStopped)
	}
	prop, err := log.Propose(ctx, []kv.Command{fenceCmd(cmdID, p.cfg.NodeID)})
	if err != nil {
		return fmt.Errorf("pipeline: settle %q: fence not appended: %w", userIDOf(cmdID), err)
	}
	wctx, cancel := context.WithTimeout(ctx, p.cfg.CommitTimeout)
	defer cancel()
	if _, err := prop.Wait(wctx); err != nil {
		return fmt.Errorf("pipeline: settle %q: fence not confirmed: %w", userIDOf(cmdID), err)
	}
	return nil
}

func userIDOf(cmdID string) string { return strings.TrimPrefix(cmdID, "req:") }
