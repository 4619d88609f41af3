package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/writ-dev/writ/pipeline"
	"github.com/writ-dev/writ/pipeline/pipelinetest"
	"github.com/writ-dev/writ/schema/ir"
)

// The pipeline workload drives the REAL pipeline (stages, latches, guards,
// apply-time Checker, outbox file) with the user's REAL plugin as its
// evaluator, over pipelinetest's in-memory log with manual commit: the log
// applies exactly the kv contract (dedup by ID, Checker veto, revision
// preconditions), and manual commit lets the suite observe replies before
// and after commit. The real raft log is exercised by the cluster tier.

func init() {
	register(&Check{ID: "property.eval-pure", Tier: TierProperty, Invariants: []string{"W7"},
		Title: "evaluating through the real plugin twice gives the same effect", Run: workloadCheck(func(w *workload) *collector { return &w.pure })})
	register(&Check{ID: "property.apply-idempotent", Tier: TierProperty, Invariants: []string{"W9"},
		Title: "the real state machine (bbolt state file) applies every committed entry; applying them again, and again after a restart, leaves the state hash unchanged", Run: checkApplyIdempotent})
	register(&Check{ID: "property.fact-sequences", Tier: TierProperty, Invariants: []string{"W8", "W9", "W3"},
		Title: "through the pipeline: perturbed fact sequences end as the ordered one, never leaving a terminal state", Run: workloadCheck(func(w *workload) *collector { return &w.seq })})
	register(&Check{ID: "property.conflict-cases", Tier: TierProperty, Invariants: []string{"W8"},
		Title: "through the pipeline: a regression becomes a durable conflict case and state is preserved", Run: workloadCheck(func(w *workload) *collector { return &w.conflict })})
	register(&Check{ID: "property.reply-after-commit", Tier: TierProperty, Invariants: []string{"W1", "W2"},
		Title: "through the pipeline: no request is answered COMMITTED before its entry is committed and applied", Run: workloadCheck(func(w *workload) *collector { return &w.reply })})
	register(&Check{ID: "property.fact-ack-durable", Tier: TierProperty, Invariants: []string{"W3", "W10"},
		Title: "through the pipeline: a fact is acknowledged only once it is in the outbox file", Run: workloadCheck(func(w *workload) *collector { return &w.ack })})
}

type workload struct {
	once     sync.Once
	notRun   string
	pure     collector
	idem     collector
	seq      collector
	conflict collector
	reply    collector
	ack      collector
	// evaluated counts the items evaluated through the plugins, by type.
	evaluated map[string]int
}

func workloadCheck(pick func(*workload) *collector) func(context.Context, *Env) Outcome {
	return func(ctx context.Context, e *Env) Outcome {
		w := e.runWorkload(ctx)
		if w.notRun != "" {
			return notRun("%s", w.notRun)
		}
		c := pick(w)
		if c.out.Cases == 0 && len(c.out.Findings) == 0 {
			return notRun("the workload produced no case for this check (the drawn requests never created a machine instance facts could move)")
		}
		return c.done()
	}
}

// pipelineCases is the number of workload cases for a run: each runs two
// pipelines with a dozen requests and a fact sequence through the plugin.
func pipelineCases(cases int) int { return max(10, cases/500) }

func (e *Env) runWorkload(ctx context.Context) *workload {
	e.wl.once.Do(func() {
		if r, ok := e.needCatalog(); !ok {
			e.wl.notRun = r
			return
		}
		if len(e.Opts.pluginPaths()) == 0 {
			e.wl.notRun = "no plugin given (--plugin PATH)"
			return
		}
		p, err := e.startPlugin()
		if err != nil {
			e.wl.notRun = "the plugin did not start (see static.plugin-types): " + err.Error()
			return
		}
		dir, err := os.MkdirTemp("", "writ-conformance-")
		if err != nil {
			e.wl.notRun = err.Error()
			return
		}
		defer os.RemoveAll(dir)
		e.wl.evaluated = map[string]int{}
		ev := &purityEval{inner: p.eval, c: &e.wl.pure, seen: e.wl.evaluated}
		n := pipelineCases(e.Opts.Cases)
		for i := 0; i < n && ctx.Err() == nil; i++ {
			if err := e.workloadCase(ctx, ev, filepath.Join(dir, strconv.Itoa(i)), i); err != nil {
				e.wl.notRun = fmt.Sprintf("workload case %d could not run: %v", i, err)
				return
			}
		}
	})
	return &e.wl
}

// rig is one real pipeline over an in-memory log with manual commit.
type rig struct {
	log *pipelinetest.FakeLog
	p   *pipeline.Pipeline
	dir string
	rec *commitRecorder
	// clock is the rig's time; only drain moves it.
	clock *pipelinetest.FakeClock
}

func newRig(dir string, cat ir.Catalog, ev pipeline.Evaluator) (*rig, error) {
	return newRigStrict(dir, cat, ev, true)
}

func newRigStrict(dir string, cat ir.Catalog, ev pipeline.Evaluator, strict bool) (*rig, error) {
	log := pipelinetest.NewFakeLog()
	clock := pipelinetest.NewFakeClock()
	p, err := pipeline.New(pipeline.Config{
		NodeID: "conformance", Catalog: cat, Log: log, Evaluator: ev, Clock: clock,
		DataDir: dir, Manual: true, Strict: strict, CommitTimeout: time.Hour, ConfigTimeout: time.Hour,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		return nil, err
	}
	rec := &commitRecorder{next: p}
	log.Checker = p.Checker()
	log.Observer = rec
	if err := p.Start(context.Background()); err != nil {
		return nil, err
	}
	return &rig{log: log, p: p, dir: dir, rec: rec, clock: clock}, nil
}

// drain runs the rig until the pipeline has decided every entry handed to
// it, so that the caller reads the state they leave. Neither a fixed number
// of commits nor an empty log means that: one receipt at its maximum items
// queues hundreds of entries, and duplicates among them are answered from
// the log's outcomes without a proposal; entries left queued would be
// decided during a later delivery, and two rigs fed different sequences
// would be read at different points of their queues. So drain goes on
// while commits happen or the queue shrinks, and moves the rig's clock
// past the longest backoff once when neither does (entries waiting to be
// retried, as time passes on a node).
func (r *rig) drain(ctx context.Context) {
	queued, advanced := -1, false
	for i := 0; i < maxDrainRounds && ctx.Err() == nil; i++ {
		r.p.Flush(ctx)
		if r.log.CommitNext() {
			advanced = false
			continue
		}
		r.p.Tick()
		r.p.Flush(ctx)
		if r.log.Pending() > 0 {
			continue
		}
		q := r.p.Status(ctx).Queued
		switch {
		case q == 0:
			return
		case queued < 0 || q < queued:
			queued, advanced = q, false
		case !advanced:
			r.clock.Advance(drainBackoff)
			advanced = true
		default:
			return // nothing moves: what is left waits for something else
		}
	}
}

// maxDrainRounds bounds one drain, far above what the largest entries the
// schemas allow need; it only stops a pipeline that never settles.
const maxDrainRounds = 1 << 20

// drainBackoff is past the pipeline's longest retry backoff (RetryMax).
const drainBackoff = 3 * time.Second

func (r *rig) machine(ctx context.Context, m, inst string) (pipeline.MachineRecord, bool) {
	rec, ok, err := r.log.Get(ctx, pipeline.MachineKey(m, inst), false)
	if err != nil || !ok {
		return pipeline.MachineRecord{}, false
	}
	mr, err := pipeline.ParseMachineRecord(rec.Value)
	return mr, err == nil
}

func (r *rig) stop() { r.p.Stop() }

// drawnEntry is one setup operation.
type drawnEntry struct {
	typ   string
	class ir.Class
	id    string
	data  []byte
}

// setupEntries draws valid request and receipt entries over a tiny pool of
// identifiers so that they address the same instances.
func (e *Env) setupEntries(rng *rand.Rand, d *drawer, n int) []drawnEntry {
	var kinds []*ir.TypeDesc
	for _, td := range e.Catalog.Types() {
		if (td.Class == ir.ClassRequest || td.Class == ir.ClassReceipt) && td.ParseJSON != nil && td.Entry != nil {
			kinds = append(kinds, td)
		}
	}
	var creators, others, receipts []drawnEntry
	// One creation per type that can create an instance, so that every
	// machine gets instances.
	for _, td := range kinds {
		if td.Machine == nil {
			continue
		}
		for try := 0; try < 30; try++ {
			data, _ := json.Marshal(d.object(td.Entry.Fields))
			if p, err := td.ParseJSON(data); err == nil && td.Machine.IsInitial(p.TargetState()) {
				creators = append(creators, drawnEntry{typ: td.Name, class: td.Class, data: data})
				break
			}
		}
	}
	for tries := 0; len(others)+len(receipts) < n && tries < n*20 && len(kinds) > 0; tries++ {
		td := kinds[rng.IntN(len(kinds))]
		data, _ := json.Marshal(d.object(td.Entry.Fields))
		p, err := td.ParseJSON(data)
		if err != nil {
			continue
		}
		de := drawnEntry{typ: td.Name, class: td.Class, data: data}
		switch {
		case td.Class == ir.ClassReceipt:
			receipts = append(receipts, de)
		case td.Machine != nil && td.Machine.IsInitial(p.TargetState()):
			creators = append(creators, de)
		default:
			others = append(others, de)
		}
	}
	// Creations first (twice, so that creations depending on each other
	// succeed in some order), then changes, then receipts: drawn entries
	// then address instances that exist.
	var out []drawnEntry
	for _, de := range append(append(append(append(creators, creators...), others...), receipts...), others...) {
		de.id = "r" + strconv.Itoa(len(out))
		if td, ok := e.Catalog.Type(de.typ); ok {
			if p, err := td.ParseJSON(de.data); err == nil && p.IdempotencyKey() != "" {
				de.id = p.IdempotencyKey()
			}
		}
		out = append(out, de)
	}
	return out
}

func (e *Env) workloadCase(ctx context.Context, ev pipeline.Evaluator, dir string, k int) error {
	w := &e.wl
	rng := rand.New(rand.NewPCG(e.Opts.Seed, 5000+uint64(k)))
	d := newDrawer(e.Schema, e.Opts.Seed, 9000+uint64(k))
	d.pool = []string{"a", "b"}
	if k%2 == 0 {
		d.pool = []string{"a"}
	}
	// Every third case draws its payloads at the largest size the schema
	// allows: strings at their maximum runes (also multi-byte), lists at
	// their maximum items; one identifier, so that its entries address the
	// same instances and commit.
	switch k % 6 {
	case 1:
		d.maxOut, d.pool = maxNarrow, []string{"a"}
	case 4:
		d.maxOut, d.pool = maxWide, []string{"a"}
	}
	setup := e.setupEntries(rng, d, 6+rng.IntN(6))

	a, err := newRig(filepath.Join(dir, "a"), e.Catalog, ev)
	if err != nil {
		return err
	}
	defer a.stop()
	e.runSetup(ctx, a, setup, true)
	// Whatever this case goes on to do, a's committed history (the setup
	// and the ordered facts) is replayed on the real state machine.
	if e.Opts.OpenState != nil {
		defer replayReal(e.Opts.OpenState, filepath.Join(dir, "state-a"), a.p.Checker(), a.rec, &w.idem)
	}
	// Pick an instance that facts can move, in the state setup left it.
	fts := e.factTargets()
	// Machines with more reportable states first: they exercise more.
	sort.SliceStable(fts, func(i, j int) bool { return len(fts[i].targets) > len(fts[j].targets) })
	var (
		ft    factTargets
		inst  string
		start pipeline.MachineRecord
		base  []seqFact
	)
	for _, cand := range fts {
		recs, _ := a.log.List(ctx, pipeline.MachinePrefix+cand.m.Name+"/", false)
		for _, rec := range recs {
			mr, err := pipeline.ParseMachineRecord(rec.Value)
			if err != nil {
				continue
			}
			if path := legalPath(rng, cand, mr.State, 1+rng.IntN(5)); len(path) > 0 {
				ft, inst, start, base = cand, strings.TrimPrefix(rec.Key, pipeline.MachinePrefix+cand.m.Name+"/"), mr, path
				break
			}
		}
		if inst != "" {
			break
		}
	}
	if inst == "" {
		return nil // no movable instance this time; the case does not count
	}
	for i := range base {
		base[i].id = fmt.Sprintf("c%d-f%d", k, i)
		if start.HasOrder && base[i].hasOrder {
			base[i].order += start.Order
		}
		base[i].scope, base[i].hasScope = start.Scope, start.HasScope && ft.scoped
	}
	payloads := map[string]drawnEntry{}
	mk := func(f seqFact) (drawnEntry, bool) {
		key := f.id + "/" + f.to + "/" + strconv.FormatUint(f.order, 10) + "/" + f.scope
		if de, ok := payloads[key]; ok {
			return de, true
		}
		de, ok := e.factPayload(d, ft, inst, f)
		if ok {
			payloads[key] = de
		}
		return de, ok
	}
	for _, f := range base {
		if _, ok := mk(f); !ok {
			return nil // the schema's fields could not carry this fact; skip
		}
	}
	// Run A: the deduplicated ordered sequence.
	for _, f := range base {
		de, _ := mk(f)
		e.report(ctx, a, de, false)
	}
	want, _ := a.machine(ctx, ft.m.Name, inst)

	// Run B: the same setup, then duplicates, reorderings, re-sends and
	// replays, then (sometimes) a regression.
	b, err := newRig(filepath.Join(dir, "b"), e.Catalog, ev)
	if err != nil {
		return err
	}
	defer b.stop()
	e.runSetup(ctx, b, setup, false)
	delivered := perturb(rng, base)
	var regression *seqFact
	var illegal []string
	for _, t := range ft.targets {
		if t != want.State && !ft.m.Allowed(want.State, t) {
			illegal = append(illegal, t)
		}
	}
	if len(illegal) > 0 {
		r := seqFact{id: fmt.Sprintf("c%d-regress", k), to: illegal[rng.IntN(len(illegal))], order: base[len(base)-1].order + 1, hasOrder: ft.ordered,
			scope: start.Scope, hasScope: start.HasScope && ft.scoped}
		regression = &r
	}
	subj := "machines." + ft.m.Name
	trace := fmt.Sprintf("instance %s starting %s; ordered %s; delivered %s", inst, start.State, describeSeq(base), describeSeq(delivered))
	prev, _ := b.machine(ctx, ft.m.Name, inst)
	for _, f := range delivered {
		de, ok := mk(f)
		if !ok {
			continue
		}
		e.report(ctx, b, de, true)
		cur, _ := b.machine(ctx, ft.m.Name, inst)
		if ft.m.IsTerminal(prev.State) && cur.State != prev.State {
			w.seq.add(Finding{Code: CodeTerminalLeft, Status: ir.StatusBlocked, Subject: subj,
				Message: fmt.Sprintf("instance %s left terminal state %s for %s after fact %s; %s", inst, prev.State, cur.State, f.id, trace),
				Fix:     "terminal states must quarantine every later fact"})
		}
		prev = cur
	}
	got, _ := b.machine(ctx, ft.m.Name, inst)
	w.seq.out.Cases++
	if got.State != want.State {
		w.seq.add(Finding{Code: CodeSequenceDiverges, Status: ir.StatusBlocked, Subject: subj,
			Message: fmt.Sprintf("ended in %s, the deduplicated ordered sequence ended in %s; %s", got.State, want.State, trace),
			Fix:     "give the fact types an order field, or declare the transitions a reordered delivery needs"})
	}
	if regression != nil {
		if de, ok := mk(*regression); ok {
			before, _, _ := b.log.Get(ctx, pipeline.ConflictKey(ft.m.Name, inst), false)
			e.report(ctx, b, de, true)
			after, _ := b.machine(ctx, ft.m.Name, inst)
			cc, ok, _ := b.log.Get(ctx, pipeline.ConflictKey(ft.m.Name, inst), false)
			w.conflict.out.Cases++
			switch {
			case after.State != got.State:
				w.conflict.add(Finding{Code: CodeRegressionNotQuarantined, Status: ir.StatusBlocked, Subject: subj,
					Message: fmt.Sprintf("regression %s → %s of instance %s changed its state to %s", got.State, regression.to, inst, after.State),
					Fix:     "illegal fact transitions must be quarantined, state preserved"})
			case !ok || cc.Rev == before.Rev:
				w.conflict.add(Finding{Code: CodeRegressionNotQuarantined, Status: ir.StatusBlocked, Subject: subj,
					Message: fmt.Sprintf("regression %s → %s of instance %s opened no conflict case at %s", got.State, regression.to, inst, pipeline.ConflictKey(ft.m.Name, inst)),
					Fix:     "illegal fact transitions must open a durable conflict case"})
			}
		}
	}
	// More sequences on the same instance, from where both runs ended.
	e.chainFactSequences(ctx, a, b, ft, inst, d, rng, k)
	// Apply twice == apply once, on the real state machine.
	if e.Opts.OpenState != nil {
		replayReal(e.Opts.OpenState, filepath.Join(dir, "state-b"), b.p.Checker(), b.rec, &w.idem)
	}
	return nil
}

// runSetup submits each setup entry and commits it; with instrument set it
// also checks that no reply arrives before commit (W1).
func (e *Env) runSetup(ctx context.Context, r *rig, setup []drawnEntry, instrument bool) {
	w := &e.wl
	for _, de := range setup {
		en := pipeline.Entry{Type: de.typ, ID: de.id, Payload: de.data}
		if de.class == ir.ClassReceipt {
			r.p.Deliver(ctx, en)
			r.drain(ctx)
			continue
		}
		h := r.p.SubmitAsync(ctx, en)
		r.p.Flush(ctx)
		if instrument && r.log.Pending() > 0 {
			w.reply.out.Cases++
			select {
			case <-h.Done():
				if o := h.Outcome(); o.Status == pipeline.StatusCommitted {
					w.reply.add(Finding{Code: CodeReplyBeforeCommit, Status: ir.StatusBlocked, Subject: de.typ,
						Message: fmt.Sprintf("request %s was answered %s while its entry was proposed but not committed", de.id, o),
						Fix:     "reply only after the entry is committed and applied (W1)"})
				}
			default:
			}
		}
		r.drain(ctx)
		select {
		case <-h.Done():
			if o := h.Outcome(); instrument && o.Status == pipeline.StatusCommitted && o.Index > r.log.Index() {
				w.reply.add(Finding{Code: CodeReplyBeforeCommit, Status: ir.StatusBlocked, Subject: de.typ,
					Message: fmt.Sprintf("request %s answered COMMITTED at index %d, but the log applied only up to %d", de.id, o.Index, r.log.Index()),
					Fix:     "reply only after the entry is committed and applied (W1)"})
			}
		default:
		}
	}
}

// report hands one fact to the pipeline, checks the acknowledgement is
// backed by the outbox file (W3), and commits it.
func (e *Env) report(ctx context.Context, r *rig, de drawnEntry, instrument bool) {
	ack := r.p.Report(ctx, pipeline.Entry{Type: de.typ, ID: de.id, Payload: de.data})
	if instrument && ack.Received {
		e.wl.ack.out.Cases++
		if !outboxHas(r.dir, de.typ, de.id) && !e.committed(ctx, r, de) {
			e.wl.ack.add(Finding{Code: CodeFactAckBeforeDurable, Status: ir.StatusBlocked, Subject: de.typ,
				Message: fmt.Sprintf("fact %s was acknowledged as received but a fresh read of the outbox file does not have it", de.id),
				Fix:     "acknowledge a fact only after it is fsync'd into the outbox (W3)"})
		}
	}
	r.drain(ctx)
}

// committed reports whether the fact's command was already applied (an ID
// duplicate is acknowledged without a new outbox record).
func (e *Env) committed(_ context.Context, r *rig, de drawnEntry) bool {
	_, ok := r.log.Outcome("fact:" + de.typ + ":" + de.id)
	return ok
}

// outboxHas reads the outbox directory afresh, as a restarted node would.
func outboxHas(dir, typ, id string) bool {
	ob, items, err := pipeline.OpenOutbox(dir)
	if err != nil {
		return false
	}
	defer ob.Close()
	for _, it := range items {
		if it.Type == typ && strings.HasSuffix(it.ID, ":"+id) {
			return true
		}
	}
	return false
}

// factPayload builds a valid payload of one of ft's fact types reporting f
// about instance inst.
func (e *Env) factPayload(d *drawer, ft factTargets, inst string, f seqFact) (drawnEntry, bool) {
	for _, name := range ft.types {
		td, ok := e.Catalog.Type(name)
		if !ok || td.ParseJSON == nil || td.Entry == nil {
			continue
		}
		en := td.Entry
		obj := d.object(en.Fields)
		obj[ft.m.Key] = inst
		switch {
		case en.ToState != "":
			if en.ToState != f.to {
				continue
			}
		case en.ToMap != nil:
			found := false
			for _, k := range sortedKeys(en.ToMap) {
				if en.ToMap[k] == f.to {
					obj[en.To], found = k, true
					break
				}
			}
			if !found {
				continue
			}
		case en.To != "":
			obj[en.To] = f.to
		default:
			continue
		}
		if en.Order != "" && f.hasOrder {
			obj[en.Order] = jsonNumber(strconv.FormatUint(f.order, 10))
		}
		if en.OrderScope != "" && f.hasScope {
			obj[en.OrderScope] = scopeValue(en, f.scope)
		}
		if en.ID != "" {
			obj[en.ID] = f.id
		}
		data, err := json.Marshal(obj)
		if err != nil {
			continue
		}
		p, err := td.ParseJSON(data)
		if err != nil || p.InstanceKey() != inst {
			continue
		}
		return drawnEntry{typ: name, class: ir.ClassFact, id: f.id, data: data}, true
	}
	return drawnEntry{}, false
}
