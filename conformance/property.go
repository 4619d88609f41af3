package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"

	"github.com/writ-dev/writ/pipeline"
	"github.com/writ-dev/writ/schema/ir"
)

func init() {
	register(&Check{ID: "property.validate-cue", Tier: TierProperty, Invariants: []string{"W2", "W6"},
		Title: "generated validation agrees with CUE on drawn valid and invalid payloads", Run: checkValidateCUE})
	register(&Check{ID: "property.codec-roundtrip", Tier: TierProperty, Invariants: []string{"W7", "W9"},
		Title: "every valid payload survives the stable binary encoding unchanged", Run: checkCodecRoundtrip})
	register(&Check{ID: "property.guard-sequences", Tier: TierProperty, Invariants: []string{"W8", "W9"},
		Title: "guards: fact sequences with duplicates, reorderings and replays converge; terminal states hold; regressions quarantine", Run: checkGuardSequences})
}

// maxFindings bounds the findings one property check reports; the rest are
// counted in a summary finding.
const maxFindings = 5

type collector struct {
	out   Outcome
	extra map[string]int
}

func (c *collector) add(f Finding) {
	n := 0
	for _, x := range c.out.Findings {
		if x.Code == f.Code && x.Subject == f.Subject {
			n++
		}
	}
	if n >= maxFindings {
		if c.extra == nil {
			c.extra = map[string]int{}
		}
		c.extra[f.Code+"\x00"+f.Subject]++
		return
	}
	c.out.Findings = append(c.out.Findings, f)
}

func (c *collector) done() Outcome {
	for _, k := range sortedKeys(c.extra) {
		code, subj, _ := cutByte(k)
		c.out.Findings = append(c.out.Findings, Finding{Code: code, Status: ir.StatusBlocked, Subject: subj,
			Message: fmt.Sprintf("%d more case(s) like the above", c.extra[k]), Fix: "see the cases above"})
	}
	return c.out
}

func cutByte(s string) (string, string, bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

// perType splits the case budget across n types (at least 1 each).
func perType(total, n int) int {
	if n == 0 {
		return 0
	}
	return max(1, (total+n-1)/n)
}

func checkValidateCUE(_ context.Context, e *Env) Outcome {
	if r, ok := e.needCatalog(); !ok {
		return notRun("%s", r)
	}
	var c collector
	types := e.Catalog.Types()
	per := perType(e.Opts.Cases, len(types))
	for ti, td := range types {
		en, ok := e.Schema.Entry(td.Name)
		if !ok || td.ParseJSON == nil {
			continue // static.table-complete reports it
		}
		d := newDrawer(e.Schema, e.Opts.Seed, uint64(ti)+1)
		d.pool = []string{"a", "b", "a1"}
		valid, invalid := 0, 0
		for i := 0; i < per; i++ {
			obj := d.object(en.Fields)
			what := "valid draw"
			if d.rng.IntN(2) == 0 {
				what = d.mutate(obj, en.Fields)
			}
			data, err := json.Marshal(obj)
			if err != nil {
				c.add(Finding{Code: CodeCheckCrashed, Status: ir.StatusBlocked, Subject: td.Name, Message: "drawn payload does not marshal: " + err.Error()})
				continue
			}
			_, genErr := td.ParseJSON(data)
			cueErr := e.Load.CheckPayloadJSON(td.Name, data)
			c.out.Cases++
			if cueErr == nil {
				valid++
			} else {
				invalid++
			}
			if (genErr == nil) != (cueErr == nil) {
				c.add(Finding{Code: CodeValidationDisagrees, Status: ir.StatusBlocked, Subject: td.Name,
					Message: fmt.Sprintf("payload %s (%s): generated validation says %s, CUE says %s", data, what, verdictText(genErr), verdictText(cueErr)),
					Fix:     "regenerate with `writ gen`; if it persists, the generator mis-compiles this constraint (report it)"})
			}
		}
		if valid == 0 || invalid == 0 {
			c.add(Finding{Code: CodeValidationDisagrees, Status: ir.StatusReviewRequired, Subject: td.Name,
				Message: fmt.Sprintf("coverage is one-sided: %d valid and %d invalid payloads drawn", valid, invalid),
				Fix:     "simplify the type's constraints or raise --cases"})
		}
	}
	return c.done()
}

func verdictText(err error) string {
	if err == nil {
		return "valid"
	}
	return "invalid (" + err.Error() + ")"
}

func checkCodecRoundtrip(_ context.Context, e *Env) Outcome {
	if r, ok := e.needCatalog(); !ok {
		return notRun("%s", r)
	}
	var c collector
	types := e.Catalog.Types()
	per := perType(e.Opts.Cases, len(types))
	for ti, td := range types {
		en, ok := e.Schema.Entry(td.Name)
		if !ok || td.ParseJSON == nil || td.ParseBinary == nil {
			continue
		}
		d := newDrawer(e.Schema, e.Opts.Seed, 1000+uint64(ti))
		for i := 0; i < per; i++ {
			data, _ := json.Marshal(d.object(en.Fields))
			p, err := td.ParseJSON(data)
			if err != nil {
				continue // not a valid draw; property.validate-cue covers validation
			}
			c.out.Cases++
			b1, err := p.AppendBinary(nil)
			if err != nil {
				c.add(Finding{Code: CodeApplyNotIdempotent, Status: ir.StatusBlocked, Subject: td.Name,
					Message: fmt.Sprintf("valid payload %s does not encode: %v", data, err), Fix: "regenerate with `writ gen`"})
				continue
			}
			q, err := td.ParseBinary(b1)
			if err != nil {
				c.add(Finding{Code: CodeApplyNotIdempotent, Status: ir.StatusBlocked, Subject: td.Name,
					Message: fmt.Sprintf("encoding of valid payload %s does not decode: %v", data, err), Fix: "regenerate with `writ gen`"})
				continue
			}
			b2, err := q.AppendBinary(nil)
			if err != nil || !bytes.Equal(b1, b2) || p.InstanceKey() != q.InstanceKey() || p.IdempotencyKey() != q.IdempotencyKey() {
				c.add(Finding{Code: CodeApplyNotIdempotent, Status: ir.StatusBlocked, Subject: td.Name,
					Message: fmt.Sprintf("payload %s changes across encode → decode → encode", data), Fix: "regenerate with `writ gen`"})
			}
		}
	}
	return c.done()
}

// seqFact is one event of a generated sequence, as the guard sees it: a
// fact, or (opens) a request that opens a new order epoch.
type seqFact struct {
	id       string
	to       string
	order    uint64
	hasOrder bool
	// scope is the order epoch the fact reports in, or the one an opener
	// opens (hasScope).
	scope    string
	hasScope bool
	opens    bool
}

func (f seqFact) incoming() pipeline.Incoming {
	return pipeline.Incoming{To: f.to, Order: f.order, HasOrder: f.hasOrder, Scope: f.scope, HasScope: f.hasScope, Opens: f.opens}
}

// guardFunc has the signature of pipeline.DecideIncoming.
type guardFunc func(m *ir.Machine, cur pipeline.MachineRecord, exists bool, in pipeline.Incoming, illegal pipeline.Verdict) (pipeline.Verdict, string)

// foldGuard applies events through decide and pipeline.NextRecord the way
// every replica does: deduplicated by ID, the machine record changed as
// the verdict says (an applied transition, or a duplicate that advances
// the order). Openers are requests (an illegal one is rejected), the rest
// facts. It returns the final record, the verdict of each delivered event
// (0 for an ID duplicate), and the first terminal-state exit it saw.
func foldGuard(decide guardFunc, m *ir.Machine, start pipeline.MachineRecord, facts []seqFact) (pipeline.MachineRecord, []pipeline.Verdict, string) {
	cur := start
	seen := map[string]bool{}
	verdicts := make([]pipeline.Verdict, len(facts))
	left := ""
	for i, f := range facts {
		if seen[f.id] {
			continue
		}
		seen[f.id] = true
		illegal := pipeline.VerdictQuarantine
		if f.opens {
			illegal = pipeline.VerdictReject
		}
		in := f.incoming()
		v, _ := decide(m, cur, true, in, illegal)
		verdicts[i] = v
		next, changed := pipeline.NextRecord(cur, true, in, v)
		if !changed {
			continue
		}
		if m.IsTerminal(cur.State) && next.State != cur.State && left == "" {
			left = fmt.Sprintf("%s → %s (fact %s)", cur.State, next.State, f.id)
		}
		cur = next
	}
	return cur, verdicts, left
}

// factTargets lists, per machine, the target states its fact types can
// report, whether they carry an order and order within epochs, and the
// entry type (a request) that opens an epoch, if any.
type factTargets struct {
	m       *ir.Machine
	types   []string
	targets []string
	ordered bool
	// scoped: the ordered fact types declare order_scope.
	scoped bool
	// opener opens a new order epoch of the machine (nil: none); openTo
	// are its target states.
	opener *ir.Entry
	openTo []string
}

func (e *Env) factTargets() []factTargets {
	var out []factTargets
	for _, m := range e.machines() {
		ft := factTargets{m: m}
		seen := map[string]bool{}
		for _, en := range e.entries() {
			if en.Machine != m.Name {
				continue
			}
			if en.OpensEpoch() && en.Class == ir.ClassRequest && ft.opener == nil && len(targetsOf(en)) > 0 {
				ft.opener, ft.openTo = en, targetsOf(en)
			}
			if en.Class != ir.ClassFact {
				continue
			}
			ts := targetsOf(en)
			if len(ts) == 0 {
				continue
			}
			ft.types = append(ft.types, en.Name)
			if en.Order != "" {
				ft.ordered = true
				ft.scoped = ft.scoped || en.OrderScope != ""
			}
			for _, t := range ts {
				if !seen[t] && m.HasState(t) {
					seen[t] = true
					ft.targets = append(ft.targets, t)
				}
			}
		}
		if !ft.scoped {
			ft.opener, ft.openTo = nil, nil
		}
		if len(ft.targets) > 0 {
			out = append(out, ft)
		}
	}
	return out
}

// legalPath draws up to n facts from start, each a declared transition or
// a re-report of the current state, with increasing order.
func legalPath(rng *rand.Rand, ft factTargets, start string, n int) []seqFact {
	return legalPathFrom(rng, ft, pipeline.MachineRecord{State: start}, n, 0)
}

// legalPathFrom draws up to n events from start: facts that are declared
// transitions or re-reports of the current state, with increasing order
// within their epoch (starting above start's order), and, when ft has an
// opener and epochs > 0, up to that many openers of a new epoch (named
// e<k>) where the opener may apply, after which the order starts again.
func legalPathFrom(rng *rand.Rand, ft factTargets, start pipeline.MachineRecord, n, epochs int) []seqFact {
	var out []seqFact
	cur := start.State
	order := uint64(0)
	if start.HasOrder {
		order = start.Order
	}
	scope, hasScope := start.Scope, start.HasScope && ft.scoped
	for len(out) < n {
		if epochs > 0 && ft.opener != nil && rng.IntN(4) == 0 {
			to := ft.openTo[rng.IntN(len(ft.openTo))]
			if ft.m.Allowed(cur, to) {
				epochs--
				scope, hasScope = fmt.Sprintf("e%d", rng.Uint32()), true
				out = append(out, seqFact{id: "open" + strconv.Itoa(len(out)), to: to, scope: scope, hasScope: true, opens: true})
				cur, order = to, 0
				continue
			}
		}
		var opts []string
		for _, t := range ft.targets {
			if t == cur || ft.m.Allowed(cur, t) {
				opts = append(opts, t)
			}
		}
		if len(opts) == 0 {
			break
		}
		t := opts[rng.IntN(len(opts))]
		order += 1 + uint64(rng.IntN(3))
		out = append(out, seqFact{id: "f" + strconv.Itoa(len(out)), to: t, order: order, hasOrder: ft.ordered, scope: scope, hasScope: hasScope})
		cur = t
	}
	return out
}

// perturb delivers a sequence with duplicates (same ID), re-sends under a
// new ID, local reorderings and replays of earlier facts. Openers stay in
// place (they are requests, committed in log order); facts are reordered
// only within their epoch, and a replay lands after its own epoch's opener
// (in a later epoch only when the facts are scoped: there it is a late
// report of an earlier epoch).
func perturb(rng *rand.Rand, base []seqFact) []seqFact {
	out := append([]seqFact(nil), base...)
	// local reorderings (only ordered facts of one epoch may be reordered:
	// without an order the guard cannot tell old from new, and nobody
	// promises it)
	for i := range out {
		j := i + rng.IntN(3)
		if j < len(out) && out[i].hasOrder && out[j].hasOrder && !out[i].opens && !out[j].opens && out[i].scope == out[j].scope {
			blocked := false
			for k := i + 1; k < j; k++ {
				blocked = blocked || out[k].opens
			}
			if !blocked {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	var facts []int
	for i, f := range base {
		if !f.opens {
			facts = append(facts, i)
		}
	}
	if len(facts) == 0 {
		return out
	}
	extra := rng.IntN(len(facts) + 1)
	for k := 0; k < extra; k++ {
		f := base[facts[rng.IntN(len(facts))]]
		if rng.IntN(2) == 0 && f.hasOrder {
			f.id += "-resent" // the same report under a new ID
		}
		// the range of positions: after the opener of f's epoch, and
		// before the next opener unless the facts are scoped
		lo, hi := 0, len(out)
		for i, g := range out {
			if g.opens && g.scope == f.scope {
				lo = i + 1
			}
		}
		if !f.hasScope {
			for i := lo; i < len(out); i++ {
				if out[i].opens {
					hi = i
					break
				}
			}
		}
		pos := lo + rng.IntN(hi-lo+1)
		if !f.hasOrder {
			// replays of unordered facts only after the fact
			for i := lo; i < hi; i++ {
				if out[i].id == f.id {
					pos = i + 1 + rng.IntN(hi-i)
				}
			}
		}
		out = append(out[:pos], append([]seqFact{f}, out[pos:]...)...)
	}
	return out
}

// Fixes a diverging sequence names.
const (
	fixGuardOrder   = "the guard must record the newest order even when a report repeats the current state (a duplicate that advances the order), so that a later, older report is stale, and order reports within their epoch; this is a defect in writ's guard (pipeline.DecideIncoming / NextRecord), not in the schema: upgrade writ, or report it"
	fixReorderSteps = "a report that arrived ahead of the one it follows was quarantined because its transition is not declared from the earlier state: declare the transitions a reordered delivery needs"
	fixNoOrder      = "give the fact types an order field (and order_scope where an attempt numbers its reports afresh), or declare the transitions a reordered delivery needs"
)

// sequenceFix is the fix a diverging sequence names: without an order the
// schema must give one; with one, either a reordered report needed an
// undeclared step (reorderQuarantined, when known) or the guard itself is
// wrong. Unknown (fact-sequences): both.
func sequenceFix(ft factTargets, reorderQuarantined *bool) string {
	switch {
	case !ft.ordered:
		return fixNoOrder
	case reorderQuarantined == nil:
		return "either " + fixReorderSteps + ", or " + fixGuardOrder
	case *reorderQuarantined:
		return fixReorderSteps
	}
	return fixGuardOrder
}

// reorderQuarantined reports whether a delivered fact of the epoch then
// current (not a late report of an earlier one) was quarantined.
func reorderQuarantined(start pipeline.MachineRecord, delivered []seqFact, verdicts []pipeline.Verdict) bool {
	scope := start.Scope
	for i, f := range delivered {
		if f.opens {
			if verdicts[i] == pipeline.VerdictApply {
				scope = f.scope
			}
			continue
		}
		if verdicts[i] == pipeline.VerdictQuarantine && (!f.hasScope || f.scope == scope) {
			return true
		}
	}
	return false
}

func checkGuardSequences(_ context.Context, e *Env) Outcome {
	if r, ok := e.needSchema(); !ok {
		return notRun("%s", r)
	}
	fts := e.factTargets()
	if len(fts) == 0 {
		return notRun("the schema has no fact type that moves a machine")
	}
	decide := guardFunc(pipeline.DecideIncoming)
	rng := rand.New(rand.NewPCG(e.Opts.Seed, 77))
	var c collector
	for i := 0; c.out.Cases < e.Opts.Cases && i < 4*e.Opts.Cases; i++ {
		ft := fts[i%len(fts)]
		start := pipeline.MachineRecord{State: ft.m.States[rng.IntN(len(ft.m.States))]}
		if ft.scoped {
			start.Scope, start.HasScope = "e0", true
		}
		base := legalPathFrom(rng, ft, start, 1+rng.IntN(8), rng.IntN(3))
		if len(base) == 0 {
			continue
		}
		want, _, _ := foldGuard(decide, ft.m, start, base)
		delivered := perturb(rng, base)
		// Regressions arrive last: a later report of a state the machine
		// may not move to from where it ended.
		var regressions []seqFact
		var illegal []string
		for _, t := range ft.targets {
			if t != want.State && !ft.m.Allowed(want.State, t) {
				illegal = append(illegal, t)
			}
		}
		if len(illegal) > 0 && rng.IntN(2) == 0 {
			r := seqFact{id: "regress", to: illegal[rng.IntN(len(illegal))], order: want.Order + 1 + uint64(rng.IntN(3)), hasOrder: ft.ordered,
				scope: want.Scope, hasScope: want.HasScope && ft.scoped}
			regressions = append(regressions, r, r)
		}
		got, verdicts, left := foldGuard(decide, ft.m, start, append(delivered, regressions...))
		c.out.Cases++
		subj := "machines." + ft.m.Name
		trace := fmt.Sprintf("start %s, ordered %s, delivered %s", string(start.AppendJSON(nil)), describeSeq(base), describeSeq(append(delivered, regressions...)))
		if left != "" {
			c.add(Finding{Code: CodeTerminalLeft, Status: ir.StatusBlocked, Subject: subj,
				Message: fmt.Sprintf("the guard let an instance leave a terminal state: %s; %s", left, trace),
				Fix:     "terminal states must quarantine every later fact; this is a defect in writ's guard (pipeline.DecideIncoming), not in the schema: upgrade writ, or report it"})
		}
		if got.State != want.State {
			rq := reorderQuarantined(start, delivered, verdicts[:len(delivered)])
			c.add(Finding{Code: CodeSequenceDiverges, Status: ir.StatusBlocked, Subject: subj,
				Message: fmt.Sprintf("ended in %s, the deduplicated ordered sequence ends in %s; %s", got.State, want.State, trace),
				Fix:     sequenceFix(ft, &rq)})
		}
		if len(regressions) > 0 {
			if v := verdicts[len(verdicts)-2]; v != pipeline.VerdictQuarantine {
				c.add(Finding{Code: CodeRegressionNotQuarantined, Status: ir.StatusBlocked, Subject: subj,
					Message: fmt.Sprintf("regression %s → %s got verdict %s, want quarantine; %s", want.State, regressions[0].to, v, trace),
					Fix:     "illegal fact transitions must become conflict cases"})
			}
		}
	}
	return c.done()
}

func describeSeq(fs []seqFact) string {
	var b bytes.Buffer
	b.WriteByte('[')
	for i, f := range fs {
		if i > 0 {
			b.WriteByte(' ')
		}
		if f.opens {
			fmt.Fprintf(&b, "%s:open(%s)→%s", f.id, f.scope, f.to)
			continue
		}
		fmt.Fprintf(&b, "%s:%s", f.id, f.to)
		if f.hasOrder {
			fmt.Fprintf(&b, "@%d", f.order)
		}
		if f.hasScope {
			fmt.Fprintf(&b, "/%s", f.scope)
		}
	}
	b.WriteByte(']')
	return b.String()
}
