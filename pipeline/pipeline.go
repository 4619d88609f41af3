package pipeline

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/writ-dev/writ/internal/backoff"
	"github.com/writ-dev/writ/kv"
	"github.com/writ-dev/writ/schema/ir"
)

// Limits on identifiers, well inside what the log accepts.
const (
	// MaxIDBytes bounds a request, fact or receipt ID.
	MaxIDBytes = 1024
	// MaxKeyBytes bounds a key a handler writes.
	MaxKeyBytes = 4096
)

// Config configures a Pipeline.
type Config struct {
	// NodeID names this node in proposed commands (kv.Command.Origin).
	NodeID string
	// Catalog is the generated schema catalog (classification, machines,
	// codecs). Required.
	Catalog ir.Catalog
	// Log is the replicated log. Required before Start (see SetLog).
	Log Log
	// Evaluator runs domain handlers. Required.
	Evaluator Evaluator
	// Clock defaults to SystemClock.
	Clock Clock
	// DataDir holds the fact outbox. Required unless Outbox is set.
	DataDir string
	// Outbox is an already opened outbox (optional).
	Outbox *Outbox
	// CommitTimeout bounds a request from ingress to reply (default 5s);
	// it is also how long a fact proposal waits before it is re-proposed.
	CommitTimeout time.Duration
	// ConfigTimeout bounds a configuration change's stage+activate before
	// it is aborted (default 10s).
	ConfigTimeout time.Duration
	// MaxPayload is the largest accepted payload in bytes (default 1 MiB).
	MaxPayload int
	// MaxBatch bounds entries per evaluation call and proposal (default 256)
	// and MaxBatchBytes their summed payload size (default 8 MiB; a single
	// larger entry still goes alone).
	MaxBatch      int
	MaxBatchBytes int
	// MaxConflicts bounds re-evaluations after failed preconditions before a
	// request gives up with UNAVAILABLE (default 16).
	MaxConflicts int
	// RetryMin and RetryMax bound the fact re-proposal backoff (defaults
	// 20ms and 2s). Each delay is shortened by up to backoff.DefaultJitter
	// of itself so that facts that failed together do not retry together.
	RetryMin, RetryMax time.Duration
	// RetryRand is the jitter's random source, returning a number in
	// [0, 1) (nil: math/rand/v2). A deterministic driver passes a fixed one.
	RetryRand func() float64
	// TickInterval is how often the background loop checks timeouts
	// (default 10ms).
	TickInterval time.Duration
	// LeaderSettle bounds how long after a leader change a request whose
	// proposal may have been lost with the old leader waits before it is
	// proposed again (default 100ms); it is proposed as soon as this node
	// applied anything under the new leader, if that comes first.
	LeaderSettle time.Duration
	// WatchRing is the number of committed outcomes retained for Watch
	// (default 8192); OutcomeCache the number of outcomes this node keeps
	// besides the log's outcome table: the details of committed ones (the
	// handler's result) and the refusals that were never appended (default
	// 65536); it also bounds the unsettled fences (fence.go).
	WatchRing    int
	OutcomeCache int
	// Manual disables the background loop: the caller drives the pipeline
	// with Flush and Tick (pipelinetest does this in a single goroutine).
	Manual bool
	// Strict makes an unclassified type at ingress panic, as the `strict`
	// build tag does.
	Strict bool
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Trace, if set, is called for every stage transition with the
	// pipeline's lock held; it must not call back into the pipeline.
	Trace func(TraceEvent)
	// OnConfigActivated is the reload hook: called on every node, in log
	// order, only after a configuration activation is applied (W5), also
	// when a restored snapshot carried the activation (reload.go). It runs
	// on the apply path and must not block.
	OnConfigActivated func(ConfigActivation)
	// Metrics, if set, receives stage timings and outcome counts.
	Metrics Metrics
	// Admission control (admission.go): MaxInflight bounds the requests in
	// flight through Submit on this node (0: unbounded; SetMaxInflight
	// changes it live); OutboxMaxEntries and OutboxMaxBytes bound the fact
	// outbox (0: unbounded). Beyond a bound an entry is refused before it
	// is queued or acknowledged.
	MaxInflight      int
	OutboxMaxEntries int
	OutboxMaxBytes   int64
}

// TraceEvent is one stage transition, for instrumentation and scenario
// tests.
type TraceEvent struct {
	Stage  string
	ID     string
	Type   string
	Index  uint64
	Detail string
}

// ConfigActivation is what the reload hook receives.
type ConfigActivation struct {
	ID         string
	Type       string
	Doc        []byte
	Generation uint64
	Index      uint64
}

// Pipeline is the staged write path. Create it with New, start it with
// Start (or drive it with Flush/Tick when Config.Manual is set).
type Pipeline struct {
	cfg     Config
	adm     admission
	cat     ir.Catalog
	log     Log
	eval    Evaluator
	clock   Clock
	lg      *slog.Logger
	outbox  *Outbox
	ownOut  bool
	checker *Checker
	strict  bool
	retry   backoff.Policy // fact, fence and config re-proposal delays

	mu       sync.Mutex
	queue    []*entry
	live     map[string]*entry // by command ID: queued or proposed
	latches  map[string]*entry
	blocked  map[string]bool
	uncert   map[string]uint64 // timed-out command ID → attempt
	fences   fenceSet          // timed-out command IDs to fence (fence.go)
	outcomes *outcomeCache
	ring     watchRing
	applied  uint64
	rl       reloadState
	attempts atomic.Uint64
	flushing bool
	batchBuf []*entry
	itemsBuf []EvalItem
	// stateArena backs the entries' state during one flush and writeArena
	// the writes of the commands it builds (flush only).
	stateArena []kv.Record
	writeArena []kv.Write
	byteArena  []byte
	flushLen   int          // entries in the flush
	ownBuf     []ownScratch // own transition of each evaluated item
	idxBuf     []int
	started    bool
	stopped    bool
	// The log's leadership as last seen by Tick: a change releases the
	// facts that are backing off or whose proposal may have been lost.
	seenTerm   uint64
	seenLeader string
	seenHas    bool
	// leaderGen counts the leader changes seen; a request proposed under
	// an older one is proposed again once the new leader settled
	// (class_request.go).
	leaderGen atomic.Uint32
	repropose reproposal
	// epoch is the clock reading entries' deadlines are relative to.
	epoch time.Time

	kick    chan struct{}
	cancel  context.CancelFunc
	runCtx  context.Context
	wg      sync.WaitGroup // the loop
	awaitWG sync.WaitGroup // proposal awaiters
}

var _ kv.ApplyObserver = (*Pipeline)(nil)

// New validates cfg, opens the outbox and reloads retained facts.
func New(cfg Config) (*Pipeline, error) {
	if cfg.Catalog == nil {
		return nil, errors.New("pipeline: Config.Catalog is required (the generated Catalog())")
	}
	if cfg.Evaluator == nil {
		return nil, errors.New("pipeline: Config.Evaluator is required")
	}
	if cfg.Clock == nil {
		cfg.Clock = SystemClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&cfg.CommitTimeout, 5*time.Second)
	def(&cfg.ConfigTimeout, 10*time.Second)
	def(&cfg.RetryMin, 20*time.Millisecond)
	def(&cfg.RetryMax, 2*time.Second)
	def(&cfg.TickInterval, 10*time.Millisecond)
	def(&cfg.LeaderSettle, 100*time.Millisecond)
	defi := func(d *int, v int) {
		if *d <= 0 {
			*d = v
		}
	}
	defi(&cfg.MaxPayload, 1<<20)
	defi(&cfg.MaxBatch, 256)
	defi(&cfg.MaxBatchBytes, 8<<20)
	defi(&cfg.MaxConflicts, 16)
	cfg.MaxConflicts = min(cfg.MaxConflicts, math.MaxInt32) // counted in an int32
	defi(&cfg.WatchRing, 8192)
	defi(&cfg.OutcomeCache, 65536)
	p := &Pipeline{
		cfg: cfg, cat: cfg.Catalog, log: cfg.Log, eval: cfg.Evaluator, clock: cfg.Clock,
		lg: cfg.Logger, checker: NewChecker(cfg.Catalog), strict: cfg.Strict || buildStrict,
		live: map[string]*entry{}, latches: map[string]*entry{}, blocked: map[string]bool{},
		uncert: map[string]uint64{}, outcomes: newOutcomeCache(cfg.OutcomeCache),
		kick:  make(chan struct{}, 1),
		retry: backoff.Policy{Min: cfg.RetryMin, Max: cfg.RetryMax, Rand: cfg.RetryRand},
	}
	p.epoch = cfg.Clock.Now()
	if !cfg.Manual {
		// Attempt numbers match apply results to proposals; start from the
		// clock so a restarted node never reuses a live number.
		p.attempts.Store(uint64(cfg.Clock.Now().UnixNano()))
	}
	p.ring.cap = cfg.WatchRing
	p.ring.notify = make(chan struct{})
	var items []OutboxItem
	switch {
	case cfg.Outbox != nil:
		p.outbox = cfg.Outbox
		items = cfg.Outbox.Items()
	case cfg.DataDir != "":
		ob, its, err := OpenOutbox(cfg.DataDir)
		if err != nil {
			return nil, err
		}
		p.outbox, p.ownOut, items = ob, true, its
		if canaryFactLostOnRestart {
			items = nil
		}
	default:
		return nil, errors.New("pipeline: Config.DataDir is required (the fact outbox lives there)")
	}
	p.outbox.notifyFail(p.logOutboxFailure)
	for _, it := range items {
		e, err := p.factFromOutbox(it)
		if err != nil {
			p.lg.Error("pipeline: outbox item cannot be decoded; keeping it as an opaque fact", "id", it.ID, "type", it.Type, "err", err)
		}
		p.enqueueLocked(e, false)
	}
	return p, nil
}

// SetLog sets the log when it could not be passed to New (the log needs the
// pipeline as its Checker and ApplyObserver). Call before Start.
func (p *Pipeline) SetLog(l Log) {
	p.mu.Lock()
	p.log = l
	p.mu.Unlock()
}

// Checker returns the apply-time guard to hand to the log.
func (p *Pipeline) Checker() *Checker { return p.checker }

// Start launches the background loop (unless Config.Manual): evaluation
// batches, proposals, timeouts and the outbox drainer.
func (p *Pipeline) Start(ctx context.Context) error {
	if err := p.start(ctx); err != nil {
		return err
	}
	p.reloadAtStart()
	return nil
}

func (p *Pipeline) start(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.log == nil {
		return errors.New("pipeline: no Log set (Config.Log or SetLog)")
	}
	if p.started {
		return errors.New("pipeline: already started")
	}
	p.started = true
	st := p.log.Status()
	if p.ring.first == 0 {
		p.ring.first = st.Applied + 1
	}
	p.seenTerm, p.seenLeader, p.seenHas = st.Term, st.LeaderID, hasLeader(st)
	if p.cfg.Manual {
		return nil
	}
	ctx, p.cancel = context.WithCancel(ctx)
	p.runCtx = ctx
	p.wg.Add(1)
	go p.run(ctx)
	return nil
}

// Stop ends the background loop and closes the outbox it opened. Entries
// still in flight are answered UNCERTAIN or UNAVAILABLE; retained facts stay
// in the outbox.
func (p *Pipeline) Stop() error {
	p.mu.Lock()
	if p.stopped {
		p.mu.Unlock()
		return nil
	}
	p.stopped = true
	cancel := p.cancel
	p.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	// The loop is the only caller of process, which starts awaiters; once
	// it has exited no awaiter can be added.
	p.wg.Wait()
	p.awaitWG.Wait()
	p.mu.Lock()
	for _, e := range p.live {
		if e.kind == kindFact {
			continue
		}
		if e.proposed || e.everApplied || e.mayCommit {
			p.finishLocked(e, Outcome{Status: StatusUncertain, Reason: "pipeline stopped while the entry was in flight; query the outcome by request ID"})
		} else {
			p.finishLocked(e, Outcome{Status: StatusUnavailable, Reason: "pipeline stopped"})
		}
	}
	p.ring.wake()
	p.mu.Unlock()
	if p.ownOut {
		return p.outbox.Close()
	}
	return nil
}

func (p *Pipeline) run(ctx context.Context) {
	defer p.wg.Done()
	for {
		p.Flush(ctx)
		p.Tick()
		select {
		case <-ctx.Done():
			return
		case <-p.kick:
		case <-p.clock.After(p.cfg.TickInterval):
		}
	}
}

func (p *Pipeline) wakeup() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// deadlineAt is t as an entry deadline: its distance from p.epoch (never 0,
// which means none).
func (p *Pipeline) deadlineAt(t time.Time) time.Duration {
	if d := t.Sub(p.epoch); d != 0 {
		return d
	}
	return -1
}

func (p *Pipeline) trace(stage string, e *entry, index uint64, detail string) {
	if p.cfg.Trace == nil {
		return
	}
	ev := TraceEvent{Stage: stage, Index: index, Detail: detail}
	if e != nil {
		ev.ID, ev.Type = e.cmdID, e.typ
	}
	p.cfg.Trace(ev)
}

// trace0 emits a trace event not tied to an entry (lock held).
func (p *Pipeline) trace0(stage, id, typ, detail string) {
	if p.cfg.Trace != nil {
		p.cfg.Trace(TraceEvent{Stage: stage, ID: id, Type: typ, Detail: detail})
	}
}

func (p *Pipeline) traceLocked(stage string, e *entry, idx uint64, d string) {
	if p.cfg.Trace == nil {
		return
	}
	p.mu.Lock()
	p.trace(stage, e, idx, d)
	p.mu.Unlock()
}
