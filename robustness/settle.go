package robustness

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/writ-dev/writ/api/writv1"
)

// Check (c), truthfulness of the answers that did not say COMMITTED: every
// request whose answers decided nothing (UNCERTAIN, or no answer), and
// every request a client was told NOT_COMMITTED, is settled after heal —
// Outcome with settle on one node, which fences an ID the replicated
// outcome table holds nothing definite for — and then looked up
// (linearizable) on every node. Every node must give the same definite
// answer: COMMITTED at one index, or NOT_COMMITTED at one (the fence's)
// index. A request a client was told NOT_COMMITTED must never turn out
// committed.
//
// "In state" follows from the same answers: the outcome table is part of
// the replicated state every node's hash covers (check converged), and the
// settled COMMITTED ones join the writes the linearizability check must
// explain every key revision with, the NOT_COMMITTED ones do not (a
// NOT_COMMITTED command that wrote a key leaves a revision no recorded
// command explains, which fails that check).

// settleTimeout bounds one settle call: the fence's commit wait and the
// quorum read.
func settleTimeout(commit time.Duration) time.Duration { return commit + 3*time.Second }

// undecided lists the request IDs check (c) settles: no attempt answered
// COMMITTED, and some answered UNCERTAIN, nothing, or NOT_COMMITTED.
// Facts are not settled (a fact's ID is fenced by nobody; check (b)
// covers the received ones).
func undecided(ids map[string]*idAttempts, order []string) []string {
	var out []string
	for _, id := range order {
		at := ids[id]
		if at.kind != "submit" {
			continue
		}
		committed, open := false, false
		for _, op := range at.ops {
			switch op.Outcome {
			case "COMMITTED":
				committed = true
			case "REJECTED", "UNAVAILABLE":
			default: // UNCERTAIN, NOT_COMMITTED, ERROR
				open = true
			}
		}
		if open && !committed {
			out = append(out, id)
		}
	}
	return out
}

// settleWorkers is how many settle calls run at once (their fences batch
// in the log).
const settleWorkers = 8

// settleAll asks one node per ID (rotating, trying the next on an error)
// for the outcome with settle set, settleWorkers at a time; it returns the
// IDs no node could settle, with the last error.
func settleAll(ctx context.Context, cl *Cluster, ids []string, commit time.Duration) map[string]string {
	failed := map[string]string{}
	var mu sync.Mutex
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < settleWorkers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(ids) {
					return
				}
				if err := settleOne(ctx, cl, i, ids[i], commit); err != nil {
					mu.Lock()
					failed[ids[i]] = err.Error()
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	return failed
}

func settleOne(ctx context.Context, cl *Cluster, i int, id string, commit time.Duration) error {
	var last error
	for try := 0; try < 2*len(cl.nodes); try++ {
		n := cl.nodes[(i+try)%len(cl.nodes)]
		cctx, cancel := context.WithTimeout(ctx, settleTimeout(commit))
		r, err := n.client.Outcome(cctx, &writv1.OutcomeRequest{RequestId: id, Settle: true})
		cancel()
		if err == nil && r.Known && definiteAnswer(r.Outcome, r.Index) {
			return nil
		}
		if err == nil {
			last = fmt.Errorf("%s answered known=%t %s (%s)", n.Name, r.Known, r.Outcome, r.Reason)
		} else {
			last = fmt.Errorf("%s: %w", n.Name, err)
		}
	}
	return last
}

// definiteAnswer reports whether an outcome is definite: COMMITTED,
// NOT_COMMITTED (fenced), or REJECTED at an index (the attempt reached the
// log and its guard refused it at apply: recorded, nothing applied).
func definiteAnswer(out writv1.Outcome, index uint64) bool {
	return out == writv1.Outcome_COMMITTED || out == writv1.Outcome_NOT_COMMITTED ||
		(out == writv1.Outcome_REJECTED && index > 0)
}

// definite reports whether every node gives the same definite answer, and
// which.
func definite(os []nodeOutcome) (writv1.Outcome, uint64, bool) {
	if len(os) == 0 {
		return 0, 0, false
	}
	first := os[0]
	for _, o := range os {
		if o.err != nil || !o.known || !definiteAnswer(o.out, o.index) {
			return 0, 0, false
		}
		if o.out != first.out || o.index != first.index {
			return 0, 0, false
		}
	}
	return first.out, first.index, true
}

// checkSettled judges the settled IDs (see the file comment). settleErr
// holds the IDs settleAll could not settle.
func checkSettled(ids map[string]*idAttempts, settled []string, res map[string][]nodeOutcome, settleErr map[string]string) (CheckResult, Uncertain) {
	r := CheckResult{Name: "uncertain-resolved", Pass: true}
	var unc Uncertain
	for _, id := range settled {
		at := ids[id]
		told, undecidedAnswer := false, false
		for _, op := range at.ops {
			switch op.Outcome {
			case "NOT_COMMITTED":
				told = true
			case "REJECTED", "UNAVAILABLE":
			default:
				undecidedAnswer = true
			}
		}
		r.Cases++
		if undecidedAnswer {
			unc.Total++
		}
		if told {
			unc.Told++
		}
		os := res[id]
		out, idx, ok := definite(os)
		switch {
		case !ok && conflicting(os):
			unc.Disagreeing++
			r.fail("%s (%s) nodes disagree after settle: %s", id, at.typ, describe(os))
		case !ok:
			unc.Unresolved++
			why := ""
			if e, bad := settleErr[id]; bad {
				why = "; settle: " + e
			}
			r.fail("%s (%s) still not definite after settle: %s%s", id, at.typ, describe(os), why)
		case told && out == writv1.Outcome_COMMITTED:
			unc.Disagreeing++
			r.fail("%s (%s) was answered NOT_COMMITTED but every node has it committed at %d", id, at.typ, idx)
		case out == writv1.Outcome_COMMITTED:
			if undecidedAnswer {
				unc.Committed++
			}
		case out == writv1.Outcome_REJECTED:
			if undecidedAnswer {
				unc.Rejected++
			}
		default:
			if undecidedAnswer {
				unc.NotCommitted++
			}
			if told {
				unc.ToldConfirmed++
			}
		}
	}
	return r, unc
}

// conflicting reports whether two nodes give different definite answers.
func conflicting(os []nodeOutcome) bool {
	var seen *nodeOutcome
	for i, o := range os {
		if o.err != nil || !o.known || !definiteAnswer(o.out, o.index) {
			continue
		}
		if seen != nil && (o.out != seen.out || o.index != seen.index) {
			return true
		}
		seen = &os[i]
	}
	return false
}

// Uncertain counts the requests check (c) settled: those whose answers
// decided nothing (UNCERTAIN, or no answer) and how they resolved, and
// those a client was told NOT_COMMITTED and whether every node confirms it.
type Uncertain struct {
	Total        int `json:"total"`
	Committed    int `json:"committed"`
	NotCommitted int `json:"not_committed"`
	// Rejected: REJECTED at one index on every node (the guard refused
	// the attempt at apply).
	Rejected int `json:"rejected"`
	// Unresolved: not definite on some node after settle.
	Unresolved int `json:"unresolved"`
	// Disagreeing: two nodes give different definite answers, or every
	// node has it committed although a client was told NOT_COMMITTED.
	Disagreeing int `json:"disagreeing"`
	// Told: requests answered NOT_COMMITTED to a client; ToldConfirmed:
	// NOT_COMMITTED on every node after heal.
	Told          int `json:"told_not_committed"`
	ToldConfirmed int `json:"told_not_committed_confirmed"`
}

func (u *Uncertain) add(o Uncertain) {
	u.Total += o.Total
	u.Committed += o.Committed
	u.NotCommitted += o.NotCommitted
	u.Rejected += o.Rejected
	u.Unresolved += o.Unresolved
	u.Disagreeing += o.Disagreeing
	u.Told += o.Told
	u.ToldConfirmed += o.ToldConfirmed
}
