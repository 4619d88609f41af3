package robustness

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/writ-dev/writ/api/writv1"
	"github.com/writ-dev/writ/pipeline"
	"github.com/writ-dev/writ/schema/ir"
)

// Check (e), guards: what the machine records of the run's instances went
// through must be what the catalog's machines allow. Every read of a
// machine key (during the run, and on every node after heal) saw the
// record at one revision; revisions only grow, so the reads of a key,
// ordered by revision, are states the instance passed through in that
// order. Then:
//
//   - no transition out of a terminal state was applied: once a read saw
//     the instance in a terminal state, every later revision is in the
//     same state;
//   - no stale per-instance order was applied: within one order epoch the
//     recorded order never goes down (a command that opens an epoch,
//     which resets the order, excuses the revisions it may lie between);
//   - one revision holds one record (two reads of a revision agree).
//
// It needs nothing of the schema but the catalog's machine definitions
// (terminal states, which entry types open an order epoch).

// recordRead is one read of a machine key that found a record.
type recordRead struct {
	rev   uint64
	value string
	where string // "n2 get at 1.2s", "final n1"
}

// finalRecords reads every target key on every node after convergence
// (serializable: each node's own state); a key a node does not hold reads
// as revision 0 with no value.
func finalRecords(ctx context.Context, cl *Cluster, ts []target) map[string][]recordRead {
	out := map[string][]recordRead{}
	for _, t := range ts {
		for i, n := range cl.nodes {
			cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			r, err := n.client.Get(cctx, &writv1.GetRequest{Key: t.key, Serializable: true})
			cancel()
			if err != nil {
				continue
			}
			rd := recordRead{where: fmt.Sprintf("final n%d", i+1)}
			if r.Found && r.Record != nil {
				rd.rev, rd.value = r.Record.Rev, string(r.Record.Value)
			}
			out[t.key] = append(out[t.key], rd)
		}
	}
	return out
}

// revisionsOf is the revisions of finalRecords, for the linearizability
// check.
func revisionsOf(finals map[string][]recordRead) map[string][]uint64 {
	out := map[string][]uint64{}
	for k, rs := range finals {
		for _, r := range rs {
			out[k] = append(out[k], r.rev)
		}
	}
	return out
}

// checkGuards is check (e) over the run's reads (ops), the reads after
// heal (finals) and the committed commands (cmds, for the epoch openers).
func checkGuards(cat ir.Catalog, ts []target, ops []Op, finals map[string][]recordRead, cmds []resolved) CheckResult {
	r := CheckResult{Name: "guards", Pass: true}
	reads := map[string][]recordRead{}
	for _, op := range ops {
		if (op.Kind == "get" || op.Kind == "sget") && op.Outcome == outOK && op.Found && op.Value != "" {
			reads[op.Key] = append(reads[op.Key], recordRead{rev: op.Rev, value: op.Value,
				where: fmt.Sprintf("%s %s at %s", op.Node, op.Kind, time.Duration(op.Start).Round(time.Millisecond))})
		}
	}
	for k, rs := range finals {
		for _, rd := range rs {
			if rd.value != "" {
				reads[k] = append(reads[k], rd)
			}
		}
	}
	openers := map[string][]uint64{} // key → indexes of committed epoch openers
	for _, c := range cmds {
		if td, ok := cat.Type(c.typ); ok && td.Entry != nil && td.Entry.OrderScope != "" && td.Entry.Order == "" {
			openers[c.key] = append(openers[c.key], c.index)
		}
	}
	for _, t := range ts {
		m, ok := cat.Machine(t.machine)
		if !ok {
			r.fail("%s: machine %q is not in the catalog", t.key, t.machine)
			continue
		}
		rs := reads[t.key]
		if len(rs) == 0 {
			continue
		}
		r.Cases++
		sort.SliceStable(rs, func(i, j int) bool { return rs[i].rev < rs[j].rev })
		checkKeyGuards(&r, m, t.key, rs, openers[t.key])
	}
	return r
}

// checkKeyGuards checks one key's reads, sorted by revision.
func checkKeyGuards(r *CheckResult, m *ir.Machine, key string, rs []recordRead, openers []uint64) {
	var prev pipeline.MachineRecord
	var prevRead recordRead
	havePrev := false
	for _, rd := range rs {
		rec, err := pipeline.ParseMachineRecord([]byte(rd.value))
		if err != nil {
			r.fail("%s: rev %d (%s) is not a machine record: %v", key, rd.rev, rd.where, err)
			continue
		}
		switch {
		case !havePrev:
		case rd.rev == prevRead.rev:
			if rd.value != prevRead.value {
				r.fail("%s: rev %d read as %s (%s) and as %s (%s)", key, rd.rev, prevRead.value, prevRead.where, rd.value, rd.where)
			}
		case m.IsTerminal(prev.State) && rec.State != prev.State:
			r.fail("%s: left terminal state %s: rev %d %s (%s), then rev %d %s (%s)", key, prev.State,
				prevRead.rev, prevRead.value, prevRead.where, rd.rev, rd.value, rd.where)
		case prev.HasOrder && rec.HasOrder && prev.HasScope == rec.HasScope && prev.Scope == rec.Scope &&
			rec.Order < prev.Order && !openedBetween(openers, prevRead.rev, rd.rev):
			r.fail("%s: stale order applied: rev %d order %d (%s), then rev %d order %d in the same epoch with no epoch opened between (%s)", key,
				prevRead.rev, prev.Order, prevRead.where, rd.rev, rec.Order, rd.where)
		}
		prev, prevRead, havePrev = rec, rd, true
	}
}

// openedBetween reports whether an epoch opener committed at an index in
// (from, to].
func openedBetween(openers []uint64, from, to uint64) bool {
	for _, i := range openers {
		if i > from && i <= to {
			return true
		}
	}
	return false
}
