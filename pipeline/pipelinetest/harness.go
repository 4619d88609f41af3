package pipelinetest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/writ-dev/writ/pipeline"
	"github.com/writ-dev/writ/schema/ir"
)

// Harness drives one real pipeline in Manual mode over a FakeLog, a
// FakeClock and a FakeEvaluator, from a single goroutine.
type Harness struct {
	Dir     string
	Catalog ir.Catalog
	Log     *FakeLog
	Clock   *FakeClock
	Eval    *FakeEvaluator
	P       *pipeline.Pipeline

	handles map[string]*pipeline.Handle
	trace   []string
	reloads []string
	strict  bool
	// Violations collects W1 breaches seen by the harness instrumentation
	// (a COMMITTED reply observed while its index is not yet applied).
	Violations []string
}

// NewHarness builds a harness with its outbox in dir (a real file).
func NewHarness(dir string, cat ir.Catalog) (*Harness, error) {
	h := &Harness{Dir: dir, Catalog: cat, Log: NewFakeLog(), Clock: NewFakeClock(), Eval: NewFakeEvaluator(),
		handles: map[string]*pipeline.Handle{}}
	if err := h.open(); err != nil {
		return nil, err
	}
	return h, nil
}

func (h *Harness) open() error {
	p, err := pipeline.New(pipeline.Config{
		NodeID: "n1", Catalog: h.Catalog, Log: h.Log, Evaluator: h.Eval, Clock: h.Clock, DataDir: h.Dir,
		CommitTimeout: 5 * time.Second, ConfigTimeout: 10 * time.Second, RetryMin: time.Second, RetryMax: 4 * time.Second,
		Manual: true, Strict: h.strict,
		// No jitter: the scripts print each retry delay.
		RetryRand: func() float64 { return 0 },
		Logger:    slog.New(slog.NewTextHandler(io.Discard, nil)),
		Trace:     h.onTrace,
		OnConfigActivated: func(a pipeline.ConfigActivation) {
			h.reloads = append(h.reloads, fmt.Sprintf("reload %s gen=%d @%d", a.ID, a.Generation, a.Index))
			h.trace = append(h.trace, fmt.Sprintf("hook      reload %s generation=%d @%d", a.ID, a.Generation, a.Index))
		},
	})
	if err != nil {
		return err
	}
	h.Log.Checker = p.Checker()
	h.Log.Observer = p
	h.P = p
	return p.Start(context.Background())
}

func (h *Harness) onTrace(ev pipeline.TraceEvent) {
	s := fmt.Sprintf("%-9s %s", ev.Stage, ev.ID)
	if ev.Index != 0 {
		s += fmt.Sprintf(" @%d", ev.Index)
	}
	if ev.Detail != "" {
		s += " " + ev.Detail
	}
	h.trace = append(h.trace, s)
}

// Restart stops the pipeline and opens a new one over the same outbox
// directory and log (a node restart with its data dir intact).
func (h *Harness) Restart() error {
	if err := h.P.Stop(); err != nil {
		return err
	}
	h.handles = map[string]*pipeline.Handle{}
	return h.open()
}

// Drain flushes and commits until nothing is pending (bounded).
func (h *Harness) Drain() {
	for i := 0; i < 100; i++ {
		h.P.Flush(context.Background())
		if !h.Log.CommitNext() {
			h.P.Tick()
			h.P.Flush(context.Background())
			if Idle(h.P, h.Log) {
				return
			}
		}
	}
}

// Idle reports whether a manually driven pipeline has nothing left to do:
// no batch awaits commit in the log and no entry waits in the pipeline's
// queue. Both are needed: a flush can finish every entry it took without
// proposing anything (a duplicate, a rejection decided on confirmed
// state), and entries queued behind those entries' key latches are taken
// only by the next flush.
func Idle(p *pipeline.Pipeline, l *FakeLog) bool {
	return l.Pending() == 0 && p.Status(context.Background()).Queued == 0
}

// checkW1 is the reply instrumentation: any handle whose outcome is
// COMMITTED must name an index the log has applied.
func (h *Harness) checkW1() {
	applied := h.Log.Index()
	for id, hd := range h.handles {
		select {
		case <-hd.Done():
			o := hd.Outcome()
			if o.Status == pipeline.StatusCommitted && o.Index > applied {
				h.Violations = append(h.Violations, fmt.Sprintf("W1: %s COMMITTED at %d but applied is %d", id, o.Index, applied))
			}
		default:
		}
	}
}

func (h *Harness) takeTrace() []string {
	t := h.trace
	h.trace = nil
	return t
}

// Run executes one script command and returns its output.
func (h *Harness) Run(cmd string, args map[string]string, input string) (string, error) {
	sc := &scriptCall{ctx: context.Background(), cmd: cmd, args: args}
	sc.entry = pipeline.Entry{Type: args["type"], ID: args["id"], Payload: []byte(input)}
	if args["format"] == "binary" {
		sc.entry.Format = pipeline.FormatBinary
	}
	handled := false
	for _, run := range []func(*scriptCall) (bool, error){h.runWrite, h.runControl, h.runInspect, h.runWatch} {
		ok, err := run(sc)
		if err != nil {
			return "", err
		}
		if handled = ok; handled {
			break
		}
	}
	if !handled {
		return "", fmt.Errorf("unknown command %q", cmd)
	}
	h.checkW1()
	tr := h.takeTrace()
	res := append(tr, sc.out...)
	return strings.Join(res, "\n"), nil
}

// scriptCall is one script command being run: its arguments, the entry its
// arguments and input describe, and the lines it printed.
type scriptCall struct {
	ctx   context.Context
	cmd   string
	args  map[string]string
	entry pipeline.Entry
	out   []string
}

func (sc *scriptCall) emit(format string, a ...any) {
	sc.out = append(sc.out, fmt.Sprintf(format, a...))
}

// runWrite runs submits, reports, deliveries, configuration changes and
// conflict resolves.
func (h *Harness) runWrite(sc *scriptCall) (bool, error) {
	switch sc.cmd {
	case "submit":
		hd := h.P.SubmitAsync(sc.ctx, sc.entry)
		h.handles[sc.args["id"]] = hd
		select {
		case <-hd.Done():
			sc.emit("reply: %s", hd.Outcome())
		default:
			sc.emit("accepted (waiting)")
		}
	case "config":
		hd := h.P.ConfigUpgradeAsync(sc.ctx, sc.entry)
		h.handles[sc.args["id"]] = hd
		select {
		case <-hd.Done():
			sc.emit("reply: %s", hd.Outcome())
		default:
			sc.emit("accepted (waiting)")
		}
	case "resolve":
		hd := h.P.ResolveConflictAsync(sc.ctx, sc.args["machine"], sc.args["instance"], sc.args["note"])
		h.handles["resolve:"+sc.args["machine"]+"/"+sc.args["instance"]] = hd
		select {
		case <-hd.Done():
			sc.emit("reply: %s", hd.Outcome())
		default:
			sc.emit("accepted (waiting)")
		}
	case "report", "deliver":
		var a pipeline.Ack
		if sc.cmd == "report" {
			a = h.P.Report(sc.ctx, sc.entry)
		} else {
			a = h.P.Deliver(sc.ctx, sc.entry)
		}
		if a.Received {
			sc.emit("ack: received id=%s items=%v", a.ID, a.ItemIDs)
		} else {
			sc.emit("ack: %s field=%s rule=%s reason=%q", a.Status, a.Field, a.Rule, a.Reason)
		}
	default:
		return false, nil
	}
	return true, nil
}

// runControl drives the log, the clock, the leader, the handler and restarts.
func (h *Harness) runControl(sc *scriptCall) (bool, error) {
	switch sc.cmd {
	case "flush":
		h.P.Flush(sc.ctx)
	case "commit":
		n := 1
		if sc.args["n"] == "all" {
			n = 1 << 30
		} else if sc.args["n"] != "" {
			fmt.Sscan(sc.args["n"], &n)
		}
		c := 0
		for ; c < n && h.Log.CommitNext(); c++ {
		}
		if c == 0 {
			sc.emit("nothing to commit")
		}
	case "lag":
		h.Log.Lag(strings.Split(sc.args["keys"], ",")...)
		sc.emit("serializable reads of %s lag until a linearizable read", sc.args["keys"])
	case "lose":
		sc.emit("lost %d pending batches", h.Log.Lose())
	case "forget":
		sc.emit("forgot %d pending batches (never appended, never answered)", h.Log.Forget())
	case "newterm":
		h.Log.NewTerm()
		sc.emit("new term %d, leader known", h.Log.Status().Term)
	case "silent-commit":
		if h.Log.CommitSilently() {
			sc.emit("committed inside an installed snapshot (Restored, no per-entry notification)")
		} else {
			sc.emit("nothing to commit")
		}
	case "advance":
		d, err := time.ParseDuration(sc.args["d"])
		if err != nil {
			return true, err
		}
		h.Clock.Advance(d)
		h.P.Tick()
	case "tick":
		h.P.Tick()
	case "leader":
		h.Log.SetLeader(sc.args["state"] != "down")
		sc.emit("leader %s", map[bool]string{true: "down", false: "up"}[sc.args["state"] == "down"])
	case "handler":
		switch {
		case sc.args["down"] == "true":
			h.Eval.SetDown(true)
		case sc.args["up"] == "true":
			h.Eval.SetDown(false)
		case sc.args["refuse"] != "":
			h.Eval.Refuse(sc.args["refuse"], sc.args["msg"])
		case sc.args["transition"] != "":
			h.Eval.AddTransition(sc.args["transition"], pipeline.Transition{Machine: sc.args["machine"], Key: sc.args["key"], To: sc.args["to"]})
		}
	case "restart":
		if err := h.Restart(); err != nil {
			return true, err
		}
		sc.emit("restarted; outbox reloaded depth=%d", h.P.Outbox().Depth)
	case "replay":
		var idx uint64
		fmt.Sscan(sc.args["index"], &idx)
		for i, r := range h.Log.Replay(idx) {
			sc.emit("replay @%d.%d %s first=@%d", idx, i, r.Status, r.FirstIndex)
		}
	default:
		return false, nil
	}
	return true, nil
}

// runInspect prints replies, outcomes, state, conflicts, health, the outbox
// and counters.
func (h *Harness) runInspect(sc *scriptCall) (bool, error) {
	switch sc.cmd {
	case "wait":
		id := sc.args["id"]
		if sc.args["resolve"] != "" {
			id = "resolve:" + sc.args["resolve"]
		}
		hd, ok := h.handles[id]
		if !ok {
			return true, fmt.Errorf("no handle %q", id)
		}
		select {
		case <-hd.Done():
			sc.emit("outcome: %s", hd.Outcome())
		default:
			sc.emit("pending (no reply yet)")
		}
	case "query":
		if o, ok := h.P.OutcomeOf(sc.args["id"]); ok {
			sc.emit("outcome-of %s: %s", sc.args["id"], o)
		} else {
			sc.emit("outcome-of %s: unknown", sc.args["id"])
		}
	case "config-outcome":
		if o, ok := h.P.ConfigOutcome(sc.args["id"]); ok {
			sc.emit("config outcome %s: %s", sc.args["id"], o)
		} else {
			sc.emit("config outcome %s: unknown", sc.args["id"])
		}
	case "state":
		recs, err := h.Log.List(sc.ctx, sc.args["prefix"], false)
		if err != nil {
			return true, err
		}
		for _, r := range recs {
			sc.emit("%s rev=%d %s", r.Key, r.Rev, r.Value)
		}
		if len(recs) == 0 {
			sc.emit("(empty)")
		}
	case "conflicts":
		cs, err := h.P.Conflicts(sc.ctx)
		if err != nil {
			return true, err
		}
		for _, c := range cs {
			sc.emit("conflict %s/%s entry=%s current=%s incoming=%s revision=%d open=%v reason=%q", c.Machine, c.Instance, c.EntryID, c.Current, c.Incoming, c.Revision, c.Open, c.Reason)
		}
		if len(cs) == 0 {
			sc.emit("(no conflicts)")
		}
	case "health":
		hl, n, err := h.P.Health(sc.ctx)
		if err != nil {
			return true, err
		}
		sc.emit("health %s open=%d", hl, n)
	case "outbox":
		st := h.P.Outbox()
		sc.emit("outbox depth=%d oldest=%s", st.Depth, st.OldestAge)
		for _, it := range st.Items {
			sc.emit("  %s %s", it.ID, it.Payload)
		}
	case "reloads":
		if len(h.reloads) == 0 {
			sc.emit("(no reloads)")
		}
		for _, r := range h.reloads {
			sc.emit("%s", r)
		}
	case "evaluator":
		sc.emit("handler calls=%d batches=%v", h.Eval.Calls, h.Eval.Batches)
	case "log":
		sc.emit("log applied=%d pending=%d", h.Log.Index(), h.Log.Pending())
	default:
		return false, nil
	}
	return true, nil
}

// runWatch prints the watch stream from an index.
func (h *Harness) runWatch(sc *scriptCall) (bool, error) {
	switch sc.cmd {
	case "watch":
		var from uint64
		fmt.Sscan(sc.args["from"], &from)
		f := pipeline.Filter{Key: sc.args["key"]}
		if sc.args["type"] != "" {
			f.Types = strings.Split(sc.args["type"], ",")
		}
		w := h.P.Watch(from, f)
		for {
			ev, ok, err := w.Poll()
			if err != nil {
				sc.emit("watch error: %v", err)
				break
			}
			if !ok {
				break
			}
			s := fmt.Sprintf("event @%d.%d %s %s key=%s %s verdict=%s", ev.Index, ev.Pos, ev.ID, ev.Type, ev.Key, ev.Status, ev.Verdict)
			if ev.Duplicate {
				s += fmt.Sprintf(" duplicate-of=@%d", ev.FirstIndex)
			}
			if ev.Reason != "" {
				s += fmt.Sprintf(" reason=%q", ev.Reason)
			}
			sc.emit("%s", s)
		}
	default:
		return false, nil
	}
	return true, nil
}
