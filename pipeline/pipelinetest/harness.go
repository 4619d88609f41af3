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
	ctx := context.Background()
	var out []string
	emit := func(format string, a ...any) { out = append(out, fmt.Sprintf(format, a...)) }
	entry := pipeline.Entry{Type: args["type"], ID: args["id"], Payload: []byte(input)}
	if args["format"] == "binary" {
		entry.Format = pipeline.FormatBinary
	}
	switch cmd {
	case "submit":
		hd := h.P.SubmitAsync(ctx, entry)
		h.handles[args["id"]] = hd
		select {
		case <-hd.Done():
			emit("reply: %s", hd.Outcome())
		default:
			emit("accepted (waiting)")
		}
	case "config":
		hd := h.P.ConfigUpgradeAsync(ctx, entry)
		h.handles[args["id"]] = hd
		select {
		case <-hd.Done():
			emit("reply: %s", hd.Outcome())
		default:
			emit("accepted (waiting)")
		}
	case "resolve":
		hd := h.P.ResolveConflictAsync(ctx, args["machine"], args["instance"], args["note"])
		h.handles["resolve:"+args["machine"]+"/"+args["instance"]] = hd
		select {
		case <-hd.Done():
			emit("reply: %s", hd.Outcome())
		default:
			emit("accepted (waiting)")
		}
	case "report", "deliver":
		var a pipeline.Ack
		if cmd == "report" {
			a = h.P.Report(ctx, entry)
		} else {
			a = h.P.Deliver(ctx, entry)
		}
		if a.Received {
			emit("ack: received id=%s items=%v", a.ID, a.ItemIDs)
		} else {
			emit("ack: %s field=%s rule=%s reason=%q", a.Status, a.Field, a.Rule, a.Reason)
		}
	case "flush":
		h.P.Flush(ctx)
	case "commit":
		n := 1
		if args["n"] == "all" {
			n = 1 << 30
		} else if args["n"] != "" {
			fmt.Sscan(args["n"], &n)
		}
		c := 0
		for ; c < n && h.Log.CommitNext(); c++ {
		}
		if c == 0 {
			emit("nothing to commit")
		}
	case "lag":
		h.Log.Lag(strings.Split(args["keys"], ",")...)
		emit("serializable reads of %s lag until a linearizable read", args["keys"])
	case "lose":
		emit("lost %d pending batches", h.Log.Lose())
	case "forget":
		emit("forgot %d pending batches (never appended, never answered)", h.Log.Forget())
	case "newterm":
		h.Log.NewTerm()
		emit("new term %d, leader known", h.Log.Status().Term)
	case "silent-commit":
		if h.Log.CommitSilently() {
			emit("committed inside an installed snapshot (Restored, no per-entry notification)")
		} else {
			emit("nothing to commit")
		}
	case "advance":
		d, err := time.ParseDuration(args["d"])
		if err != nil {
			return "", err
		}
		h.Clock.Advance(d)
		h.P.Tick()
	case "tick":
		h.P.Tick()
	case "wait":
		id := args["id"]
		if args["resolve"] != "" {
			id = "resolve:" + args["resolve"]
		}
		hd, ok := h.handles[id]
		if !ok {
			return "", fmt.Errorf("no handle %q", id)
		}
		select {
		case <-hd.Done():
			emit("outcome: %s", hd.Outcome())
		default:
			emit("pending (no reply yet)")
		}
	case "query":
		if o, ok := h.P.OutcomeOf(args["id"]); ok {
			emit("outcome-of %s: %s", args["id"], o)
		} else {
			emit("outcome-of %s: unknown", args["id"])
		}
	case "config-outcome":
		if o, ok := h.P.ConfigOutcome(args["id"]); ok {
			emit("config outcome %s: %s", args["id"], o)
		} else {
			emit("config outcome %s: unknown", args["id"])
		}
	case "leader":
		h.Log.SetLeader(args["state"] != "down")
		emit("leader %s", map[bool]string{true: "down", false: "up"}[args["state"] == "down"])
	case "handler":
		switch {
		case args["down"] == "true":
			h.Eval.SetDown(true)
		case args["up"] == "true":
			h.Eval.SetDown(false)
		case args["refuse"] != "":
			h.Eval.Refuse(args["refuse"], args["msg"])
		case args["transition"] != "":
			h.Eval.AddTransition(args["transition"], pipeline.Transition{Machine: args["machine"], Key: args["key"], To: args["to"]})
		}
	case "state":
		recs, err := h.Log.List(ctx, args["prefix"], false)
		if err != nil {
			return "", err
		}
		for _, r := range recs {
			emit("%s rev=%d %s", r.Key, r.Rev, r.Value)
		}
		if len(recs) == 0 {
			emit("(empty)")
		}
	case "watch":
		var from uint64
		fmt.Sscan(args["from"], &from)
		f := pipeline.Filter{Key: args["key"]}
		if args["type"] != "" {
			f.Types = strings.Split(args["type"], ",")
		}
		w := h.P.Watch(from, f)
		for {
			ev, ok, err := w.Poll()
			if err != nil {
				emit("watch error: %v", err)
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
			emit("%s", s)
		}
	case "conflicts":
		cs, err := h.P.Conflicts(ctx)
		if err != nil {
			return "", err
		}
		for _, c := range cs {
			emit("conflict %s/%s entry=%s current=%s incoming=%s revision=%d open=%v reason=%q", c.Machine, c.Instance, c.EntryID, c.Current, c.Incoming, c.Revision, c.Open, c.Reason)
		}
		if len(cs) == 0 {
			emit("(no conflicts)")
		}
	case "health":
		hl, n, err := h.P.Health(ctx)
		if err != nil {
			return "", err
		}
		emit("health %s open=%d", hl, n)
	case "outbox":
		st := h.P.Outbox()
		emit("outbox depth=%d oldest=%s", st.Depth, st.OldestAge)
		for _, it := range st.Items {
			emit("  %s %s", it.ID, it.Payload)
		}
	case "restart":
		if err := h.Restart(); err != nil {
			return "", err
		}
		emit("restarted; outbox reloaded depth=%d", h.P.Outbox().Depth)
	case "replay":
		var idx uint64
		fmt.Sscan(args["index"], &idx)
		for i, r := range h.Log.Replay(idx) {
			emit("replay @%d.%d %s first=@%d", idx, i, r.Status, r.FirstIndex)
		}
	case "reloads":
		if len(h.reloads) == 0 {
			emit("(no reloads)")
		}
		for _, r := range h.reloads {
			emit("%s", r)
		}
	case "evaluator":
		emit("handler calls=%d batches=%v", h.Eval.Calls, h.Eval.Batches)
	case "log":
		emit("log applied=%d pending=%d", h.Log.Index(), h.Log.Pending())
	default:
		return "", fmt.Errorf("unknown command %q", cmd)
	}
	h.checkW1()
	tr := h.takeTrace()
	res := append(tr, out...)
	return strings.Join(res, "\n"), nil
}
