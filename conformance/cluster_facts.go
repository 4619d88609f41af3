package conformance

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/writ-dev/writ/api/writv1"
	"github.com/writ-dev/writ/schema/ir"
)

// checkFactsOnce verifies every fact is committed on every node and applied
// exactly once. Every node's dedup table must record the fact applied, at
// the same index: a second application under the same ID is a duplicate
// that does not overwrite it. The watch stream counts applications too, on
// the first node whose stream holds an event for every fact; when no node's
// does (its feed starts after a restart), the dedup tables are the count and
// a REVIEW_REQUIRED finding says so. The count is never skipped:
// if neither can be read the check fails INCOMPLETE.
func (c *cluster) checkFactsOnce(ctx context.Context, facts []drawnEntry, from uint64) {
	var types []string
	seen := map[string]bool{}
	for _, f := range facts {
		if !seen[f.typ] {
			seen[f.typ] = true
			types = append(types, f.typ)
		}
	}
	var applied map[string]int
	var events map[string][]string // by ID, the counted stream's events (for a failure's message)
	var counted string
	var watchErrs []string
	for _, n := range c.nodes {
		evs, err := watchAll(ctx, n, from, types...)
		if c.watchFails {
			evs, err = nil, errors.New("watch refused by the suite's test double")
		}
		if err != nil {
			watchErrs = append(watchErrs, n.Name+": "+err.Error())
			continue
		}
		// Every event of an ID is one application attempt; "duplicate"
		// (an ID applied before, or a report of the current state) does
		// not count as an application.
		counts, present, byID := map[string]int{}, map[string]bool{}, map[string][]string{}
		for _, ev := range evs {
			present[ev.Id] = true
			byID[ev.Id] = append(byID[ev.Id], fmt.Sprintf("index %d %s %q", ev.Index, ev.Status, ev.Reason))
			if ev.Status != "duplicate" {
				counts[ev.Id]++
			}
		}
		// The stream counts only if it holds an event for every fact
		// (an empty or partial stream would count nothing twice).
		missing := 0
		for _, f := range facts {
			if !present["fact:"+f.typ+":"+f.id] {
				missing++
			}
		}
		if missing > 0 {
			watchErrs = append(watchErrs, fmt.Sprintf("%s: the stream holds no event for %d of the %d facts", n.Name, missing, len(facts)))
			continue
		}
		applied, events, counted = counts, byID, n.Name
		break
	}
	if applied == nil {
		c.out.Findings = append(c.out.Findings, Finding{Code: CodeClusterScenario, Status: ir.StatusReviewRequired,
			Subject: c.sc + ": watch",
			Message: fmt.Sprintf("no node's watch stream from index %d holds the facts' events (%s); the exactly-once count comes from every node's dedup table", from, strings.Join(watchErrs, "; ")),
			Fix:     "keep the watch feed across restarts to count applications from the stream too"})
	}
	unreadable := 0
	for _, f := range facts {
		id := "fact:" + f.typ + ":" + f.id
		if applied[id] > 1 {
			c.fail(f.typ, "a received fact must be applied exactly once (W3)", "fact %s applied %d times (%s's watch stream from index %d: %s)",
				f.id, applied[id], counted, from, strings.Join(events[id], "; "))
		}
		where := map[string][]string{}
		for _, n := range c.nodes {
			cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			o, err := n.Client().Outcome(cctx, &writv1.OutcomeRequest{RequestId: id})
			cancel()
			switch {
			case err != nil:
				unreadable++
				where["unreadable"] = append(where["unreadable"], n.Name)
			case !o.Known:
				c.fail(f.typ, "a received fact must be committed on every replica after heal (W3)", "%s: fact %s not committed", n.Name, f.id)
			default:
				k := fmt.Sprintf("%s@%d", o.Status, o.Index)
				where[k] = append(where[k], n.Name)
			}
		}
		delete(where, "unreadable")
		if len(where) > 1 {
			c.fail(f.typ, "a fact is applied once, at one index, on every replica (W3, W9)", "fact %s is recorded differently per node: %v", f.id, where)
		}
	}
	if unreadable > 0 {
		c.out.Findings = append(c.out.Findings, Finding{Code: CodeClusterScenario, Status: ir.StatusIncomplete,
			Subject: c.sc + ": outcomes",
			Message: fmt.Sprintf("%d fact outcome read(s) failed, so exactly-once could not be verified for every fact on every node", unreadable),
			Fix:     "make outcomes queryable by ID on every node after heal"})
	}
}
