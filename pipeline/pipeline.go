package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

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
	// 20ms and 2s).
	RetryMin, RetryMax time.Duration
	// TickInterval is how often the background loop checks timeouts
	// (default 10ms).
	TickInterval time.Duration
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

type kind uint8

const (
	kindRequest kind = iota + 1
	kindFact
	kindConfig
)

type cfgPhase uint8

const (
	phaseStage cfgPhase = iota
	phaseActivate
	phaseAbort
)

// entry is one operation moving through the stages.
type entry struct {
	desc    *ir.TypeDesc
	typ     string
	cmdID   string
	userID  string
	payload ir.Payload
	json    []byte
	machine *ir.Machine
	inst    string
	mkey    string
	keys    []string
	keyBuf  [3]string // backs keys when they fit

	tm     *reqTiming // stage times of a request (only when measured)
	waited bool       // has waited for a key latch (counted once)

	deadline  time.Duration // since Pipeline.epoch (see deadlineAt); 0: none (facts)
	attempt   uint64
	conflicts int32
	// answered is set (after done is closed) once replied is: Done reads
	// done without the lock from then on.
	answered atomic.Bool
	t        *entryTiming // backoff and re-proposal times (facts, config, retries)

	kind        kind
	class       ir.Class
	rounds      uint8 // NeedKeys rounds
	verdict     Verdict
	phase       cfgPhase
	proposed    bool
	everApplied bool
	held        bool
	queued      bool
	finished    bool
	replied     bool
	receiptItem bool
	// inFlush: the entry is being evaluated outside the lock; completion
	// and timeouts that arrive meanwhile are deferred to the end of the
	// flush (late, timeoutWhy).
	inFlush bool
	plan    plan // scratch for one flush

	x *entryExtra // rarely needed fields

	provisional kv.Effect
	result      []byte

	done chan struct{} // made on first use (doneLocked)
	out  Outcome
	h    Handle

	// scratch for one flush
	planOut *Outcome
	cmd     *kv.Command // into the flush's command arena
	state   []kv.Record
}

// entryExtra holds the fields only some entries use.
type entryExtra struct {
	resolve    string // conflict key to resolve (ResolveConflict)
	note       string
	resolution *Resolution // audit record of a ResolveConflictAs
	recordOnly string      // receipt item rejection to record in the log
	altID      string      // command ID proposed when it differs from cmdID
	// An application (late) or a timeout (timeoutWhy) that arrived while
	// the entry was in a flush, handled when the flush ends.
	late       *lateResult
	timeoutWhy string
	// hookWait is an activation's apply result parked until the reload
	// hook for its index has run here (reload.go).
	hookWait *lateResult
}

// entryTiming holds an entry's backoff and re-proposal bookkeeping: facts
// and config decisions always have it, requests only once they back off.
type entryTiming struct {
	notBefore  time.Time
	proposedAt time.Time
	backoff    time.Duration
	proposals  uint32 // proposals of this entry since the node started
}

func (e *entry) timing() *entryTiming {
	if e.t == nil {
		e.t = &entryTiming{}
	}
	return e.t
}

// notBefore is when a backing-off entry may be evaluated again.
func (e *entry) notBefore() time.Time {
	if e.t == nil {
		return time.Time{}
	}
	return e.t.notBefore
}

func (e *entry) extra() *entryExtra {
	if e.x == nil {
		e.x = &entryExtra{}
	}
	return e.x
}

func (e *entry) resolveKey() string {
	if e.x == nil {
		return ""
	}
	return e.x.resolve
}

func (e *entry) recordOnly() string {
	if e.x == nil {
		return ""
	}
	return e.x.recordOnly
}

func (e *entry) altID() string {
	if e.x == nil {
		return ""
	}
	return e.x.altID
}

// lateResult is an application that arrived while the entry was in a
// flush.
type lateResult struct {
	cmd kv.Command
	res kv.Result
}

// ownScratch is an entry's own transition as guarded before evaluation.
type ownScratch struct {
	t  guardTransition
	ok bool
}

type plan uint8

const (
	planNone plan = iota
	planPropose
	planFinish   // finish with planOut now
	planRetry    // transient failure: back off (facts) / UNAVAILABLE (requests)
	planRequeue  // evaluate again now (more keys, config phase change)
	planIdentity // already applied: finish as duplicate
)

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
		kick: make(chan struct{}, 1),
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
		if e.proposed || e.everApplied {
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

// ---- ingress ----------------------------------------------------------

// Class reports how the pipeline would classify a type (ok=false when the
// catalog does not declare it).
func (p *Pipeline) Class(typ string) (ir.Class, bool) {
	d, ok := p.cat.Type(typ)
	if !ok {
		return ir.ClassUnknown, false
	}
	return d.Class, true
}

type parsed struct {
	desc    *ir.TypeDesc
	class   ir.Class
	payload ir.Payload
	json    []byte
	id      string
}

func reject(typ, field, rule, msg string) Outcome {
	return Outcome{Type: typ, Status: StatusRejected, Field: field, Rule: rule,
		Reason: fmt.Sprintf("%s: field %q: %s (rule %s)", typ, field, msg, rule)}
}

// parse is the validate stage.
func (p *Pipeline) parse(en Entry) (parsed, *Outcome) {
	defer p.mstage(stageValidate, p.mstart())
	var ps parsed
	if len(en.Payload) > p.cfg.MaxPayload {
		o := reject(en.Type, "payload", "size <= "+strconv.Itoa(p.cfg.MaxPayload),
			fmt.Sprintf("payload is %d bytes; split it or raise the node's max payload", len(en.Payload)))
		return ps, &o
	}
	d, ok := p.cat.Type(en.Type)
	if !ok {
		o := reject(en.Type, "type", "declared", fmt.Sprintf("unknown entry type %q: use a type declared in the schema (fingerprint %s)", en.Type, p.cat.Fingerprint()))
		return ps, &o
	}
	ps.desc, ps.class = d, d.Class
	if !d.Class.Valid() {
		if p.strict {
			panic(fmt.Sprintf("pipeline: W6 violated: entry type %q reached the write path without a classification", en.Type))
		}
		p.lg.Error("pipeline: unclassified entry type at ingress; handling it as a fact (W6)", "type", en.Type)
		ps.class = ir.ClassFact
	}
	var err error
	switch en.Format {
	case FormatJSON:
		if d.ParseJSON == nil {
			err = errors.New("no JSON decoder generated")
		} else {
			ps.payload, err = d.ParseJSON(en.Payload)
		}
		ps.json = en.Payload
	case FormatBinary:
		if d.ParseBinary == nil {
			err = errors.New("no binary decoder generated")
		} else {
			ps.payload, err = d.ParseBinary(en.Payload)
		}
		if err == nil {
			ps.json, err = json.Marshal(ps.payload)
		}
	default:
		o := reject(en.Type, "format", "json|binary", fmt.Sprintf("unknown payload format %d", en.Format))
		return ps, &o
	}
	if err != nil {
		var fe *ir.FieldError
		if errors.As(err, &fe) {
			o := rejectField(fe)
			if o.Type == "" {
				o.Type = en.Type
			}
			return ps, &o
		}
		o := reject(en.Type, "payload", "decode", "payload does not decode: "+err.Error())
		return ps, &o
	}
	if ps.payload == nil {
		o := reject(en.Type, "payload", "decode", "payload decoded to nothing")
		return ps, &o
	}
	ps.id = en.ID
	if ps.id == "" {
		ps.id = ps.payload.IdempotencyKey()
	}
	if ps.id == "" || len(ps.id) > MaxIDBytes {
		field := "id"
		if d.Entry != nil && d.Entry.ID != "" && en.ID == "" {
			field = d.Entry.ID
		}
		if ps.id == "" {
			o := reject(en.Type, field, "required", "an ID is required: set the request/fact ID so retries are deduplicated")
			return ps, &o
		}
		o := reject(en.Type, field, "len <= "+strconv.Itoa(MaxIDBytes), fmt.Sprintf("the ID is %d bytes; use a shorter one", len(ps.id)))
		return ps, &o
	}
	return ps, nil
}

func requestCmdID(id string) string    { return "req:" + id }
func factCmdID(typ, id string) string  { return "fact:" + typ + ":" + id }
func configCmdID(id, ph string) string { return "cfg:" + id + ":" + ph }

// newEntry builds an entry for a parsed payload. The command ID is the
// concatenation of idParts; it, the machine key and (for facts) the
// conflict key share one allocation.
func (p *Pipeline) newEntry(k kind, ps parsed, idParts ...string) *entry {
	e := &entry{kind: k, class: ps.class, desc: ps.desc, typ: ps.desc.Name, userID: ps.id,
		payload: ps.payload, json: ps.json}
	keys := ps.payload.Keys()
	n := len(keys)
	if ps.desc.Machine != nil {
		e.machine = ps.desc.Machine
		e.inst = ps.payload.InstanceKey()
		if e.inst != "" {
			n++ // machine key
			if e.class != ir.ClassRequest {
				n++ // conflict key
			}
		}
	}
	if n <= len(e.keyBuf) {
		e.keys = e.keyBuf[:0]
	} else {
		e.keys = make([]string, 0, n)
	}
	e.keys = append(e.keys, keys...)
	idLen := 0
	for _, s := range idParts {
		idLen += len(s)
	}
	withMachine := e.machine != nil && e.inst != ""
	withConflict := withMachine && e.class != ir.ClassRequest
	size := idLen
	if withMachine {
		size += len(MachinePrefix) + len(e.machine.Name) + 1 + len(e.inst)
	}
	if withConflict {
		size += len(ConflictPrefix) + len(e.machine.Name) + 1 + len(e.inst)
	}
	var sb strings.Builder
	sb.Grow(size)
	for _, s := range idParts {
		sb.WriteString(s)
	}
	if withMachine {
		sb.WriteString(MachinePrefix)
		sb.WriteString(e.machine.Name)
		sb.WriteByte('/')
		sb.WriteString(e.inst)
	}
	mkeyEnd := sb.Len()
	if withConflict {
		sb.WriteString(ConflictPrefix)
		sb.WriteString(e.machine.Name)
		sb.WriteByte('/')
		sb.WriteString(e.inst)
	}
	all := sb.String()
	e.cmdID = all[:idLen]
	if withMachine {
		e.mkey = all[idLen:mkeyEnd]
		e.keys = append(e.keys, e.mkey)
	}
	if withConflict {
		e.keys = append(e.keys, all[mkeyEnd:])
	}
	return e
}

func (p *Pipeline) factFromOutbox(it OutboxItem) (*entry, error) {
	e := &entry{kind: kindFact, class: ir.ClassFact, typ: it.Type, cmdID: it.ID, userID: it.ID, json: it.Payload}
	d, ok := p.cat.Type(it.Type)
	if !ok || d.ParseJSON == nil {
		return e, fmt.Errorf("pipeline: type %q is not declared by this schema", it.Type)
	}
	pl, err := d.ParseJSON(it.Payload)
	if err != nil {
		return e, fmt.Errorf("pipeline: %w", err)
	}
	ps := parsed{desc: d, class: ir.ClassFact, payload: pl, json: it.Payload, id: pl.IdempotencyKey()}
	ne := p.newEntry(kindFact, ps, it.ID)
	ne.userID = strings.TrimPrefix(it.ID, "fact:"+it.Type+":")
	return ne, nil
}

// enqueueLocked adds e to the evaluation queue (front when urgent).
func (p *Pipeline) enqueueLocked(e *entry, front bool) {
	if e.queued || e.finished {
		return
	}
	e.queued = true
	p.live[e.cmdID] = e
	if front {
		p.queue = append(p.queue, nil)
		copy(p.queue[1:], p.queue)
		p.queue[0] = e
	} else {
		p.queue = append(p.queue, e)
	}
}

// Handle is an in-flight request.
type Handle struct {
	e *entry
	p *Pipeline
}

// Done is closed when the outcome is known.
func (h *Handle) Done() <-chan struct{} {
	if h.e.answered.Load() {
		// e.done no longer changes once the entry is answered
		if d := h.e.done; d != nil {
			return d
		}
		return closedDone
	}
	h.p.mu.Lock()
	defer h.p.mu.Unlock()
	return h.e.doneLocked()
}

// closedDone is the Done channel of entries answered before anyone asked.
var closedDone = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// doneLocked is the entry's Done channel, made on first use: nobody waits
// on most receipt items or on requests answered before their caller looks.
func (e *entry) doneLocked() chan struct{} {
	if e.done == nil {
		if e.replied {
			return closedDone
		}
		e.done = make(chan struct{})
	}
	return e.done
}

// Outcome returns the outcome; valid after Done is closed.
func (h *Handle) Outcome() Outcome {
	h.p.mu.Lock()
	defer h.p.mu.Unlock()
	return h.e.out
}

func doneHandle(p *Pipeline, o Outcome) *Handle {
	e := &entry{out: o, finished: true, replied: true}
	e.answered.Store(true)
	return &Handle{e: e, p: p}
}

// Submit runs a request to its outcome (W1, W2): it returns COMMITTED only
// after every entry the request produced is committed and applied here.
func (p *Pipeline) Submit(ctx context.Context, en Entry) Outcome {
	if o, ok := p.admitRequest(en); !ok {
		return o
	}
	defer p.adm.inflight.Add(-1)
	h := p.submit(ctx, en, true)
	return p.wait(ctx, h)
}

func (p *Pipeline) wait(ctx context.Context, h *Handle) Outcome {
	done := h.Done()
	select {
	case <-done:
	case <-ctx.Done():
		p.mu.Lock()
		if !h.e.replied {
			p.timeoutLocked(h.e, "request context ended: "+ctx.Err().Error())
		}
		p.mu.Unlock()
		<-done
	}
	return h.Outcome()
}

// SubmitAsync starts a request and returns its handle without waiting.
func (p *Pipeline) SubmitAsync(ctx context.Context, en Entry) *Handle {
	return p.submit(ctx, en, false)
}

// submit starts a request; waiter says the caller waits on it, so its Done
// channel is made at once (under the lock startRequest takes anyway).
func (p *Pipeline) submit(ctx context.Context, en Entry, waiter bool) *Handle {
	ps, bad := p.parse(en)
	if bad != nil {
		bad.ID = en.ID
		p.traceReject(en, bad)
		return doneHandle(p, *bad)
	}
	if ps.class != ir.ClassRequest {
		o := reject(en.Type, "type", "class request", fmt.Sprintf("type is class %s: use %s", ps.class, verbFor(ps.class)))
		o.ID = ps.id
		return doneHandle(p, o)
	}
	return p.startRequest(ctx, ps, false, waiter)
}

func verbFor(c ir.Class) string {
	switch c {
	case ir.ClassFact:
		return "Report"
	case ir.ClassReceipt:
		return "Deliver"
	case ir.ClassConfig:
		return "ConfigUpgrade"
	}
	return "Submit"
}

func (p *Pipeline) traceReject(en Entry, o *Outcome) {
	p.mrefused(en.Type, "validation")
	if p.cfg.Trace == nil {
		return
	}
	p.mu.Lock()
	p.cfg.Trace(TraceEvent{Stage: "validate", ID: en.ID, Type: en.Type, Detail: "rejected " + o.Field + ": " + o.Rule})
	p.mu.Unlock()
}

func (p *Pipeline) startRequest(ctx context.Context, ps parsed, receiptItem, waiter bool) *Handle {
	now := p.clock.Now()
	deadline := now.Add(p.cfg.CommitTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	// Built before taking the lock; dropped if the request is already in
	// flight.
	e := p.newEntry(kindRequest, ps, "req:", ps.id)
	if !receiptItem || canaryReceiptDropped {
		e.deadline = p.deadlineAt(deadline) // a receipt item's starts at its proposal (receipt.go)
	}
	e.tm = p.mtiming(now)
	e.receiptItem = receiptItem
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return doneHandle(p, Outcome{ID: ps.id, Type: ps.desc.Name, Status: StatusUnavailable, Reason: ErrStopped.Error()})
	}
	if o := p.reusedAtIngressLocked(e.cmdID, e.json); o != nil && !receiptItem {
		o.ID, o.Type = ps.id, ps.desc.Name
		return doneHandle(p, *o)
	}
	if cur := p.live[e.cmdID]; cur != nil && !cur.replied {
		// Same request ID already in flight: share its outcome.
		if waiter {
			cur.doneLocked()
		}
		return &Handle{e: cur, p: p}
	}
	if waiter {
		e.doneLocked()
	}
	p.trace("validate", e, 0, "ok")
	p.enqueueLocked(e, false)
	p.wakeup()
	e.h = Handle{e: e, p: p}
	return &e.h
}

// Report accepts a fact (W3): the Ack says Received only after the fact is
// fsync'd into this node's outbox; the pipeline then proposes it until it is
// committed, with no timeout and with or without a leader.
func (p *Pipeline) Report(ctx context.Context, en Entry) Ack {
	ps, bad := p.parse(en)
	if bad != nil {
		p.traceReject(en, bad)
		return Ack{ID: en.ID, Status: bad.Status, Reason: bad.Reason, Field: bad.Field, Rule: bad.Rule}
	}
	if ps.class != ir.ClassFact {
		o := reject(en.Type, "type", "class fact", fmt.Sprintf("type is class %s: use %s", ps.class, verbFor(ps.class)))
		return Ack{ID: ps.id, Status: o.Status, Reason: o.Reason, Field: o.Field, Rule: o.Rule}
	}
	if o := p.factReused(ps); o != nil {
		return Ack{ID: ps.id, Status: o.Status, Reason: o.Reason, Field: o.Field, Rule: o.Rule}
	}
	if err := p.acceptFacts([]parsed{ps}); err != nil {
		return Ack{ID: ps.id, Status: StatusUnavailable, Reason: err.Error(), Overloaded: errors.Is(err, ErrOutboxFull)}
	}
	return Ack{Received: true, ID: ps.id}
}

// acceptFacts makes facts durable, then queues them.
func (p *Pipeline) acceptFacts(facts []parsed) error {
	now := p.clock.Now().UTC()
	items := make([]OutboxItem, len(facts))
	es := make([]*entry, len(facts))
	for i, ps := range facts {
		es[i] = p.newEntry(kindFact, ps, "fact:", ps.desc.Name, ":", ps.id)
		items[i] = OutboxItem{ID: es[i].cmdID, Type: ps.desc.Name, Payload: ps.json, Received: now}
	}
	if err := p.addFacts(items); err != nil {
		return err
	}
	p.mreceived(es)
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, e := range es {
		if p.live[e.cmdID] != nil {
			continue
		}
		p.trace("outbox", e, 0, "fsync ok, received")
		p.enqueueLocked(e, false)
	}
	p.wakeup()
	return nil
}

// Deliver accepts a receipt (W4): the Ack confirms receipt only. Each item
// goes through its own class — facts into the outbox before the Ack,
// requests queued — and per-item outcomes appear on the watch stream, never
// in the Ack.
func (p *Pipeline) Deliver(ctx context.Context, en Entry) Ack {
	ps, bad := p.parse(en)
	if bad != nil {
		p.traceReject(en, bad)
		return Ack{ID: en.ID, Status: bad.Status, Reason: bad.Reason, Field: bad.Field, Rule: bad.Rule}
	}
	if ps.class != ir.ClassReceipt {
		o := reject(en.Type, "type", "class receipt", fmt.Sprintf("type is class %s: use %s", ps.class, verbFor(ps.class)))
		return Ack{ID: ps.id, Status: o.Status, Reason: o.Reason, Field: o.Field, Rule: o.Rule}
	}
	items := ps.payload.Items()
	var facts, reqs []parsed
	ack := Ack{Received: true, ID: ps.id}
	for i, it := range items {
		d, ok := p.cat.Type(it.EntryType())
		if !ok {
			o := reject(en.Type, fmt.Sprintf("items[%d]", i), "declared", fmt.Sprintf("item type %q is not declared", it.EntryType()))
			return Ack{ID: ps.id, Status: o.Status, Reason: o.Reason, Field: o.Field, Rule: o.Rule}
		}
		ips := parsed{desc: d, class: d.Class, payload: it}
		if !d.Class.Valid() {
			if p.strict {
				panic(fmt.Sprintf("pipeline: W6 violated: receipt item type %q is unclassified", d.Name))
			}
			p.lg.Error("pipeline: unclassified receipt item type; handling it as a fact (W6)", "type", d.Name)
			ips.class = ir.ClassFact
		}
		if err := it.Validate(); err != nil {
			var fe *ir.FieldError
			field := fmt.Sprintf("items[%d]", i)
			rule := "valid"
			if errors.As(err, &fe) {
				field += "." + fe.Field
				rule = fe.Rule
			}
			return Ack{ID: ps.id, Status: StatusRejected, Reason: err.Error(), Field: field, Rule: rule}
		}
		js, err := json.Marshal(it)
		if err != nil {
			return Ack{ID: ps.id, Status: StatusRejected, Reason: "item does not encode: " + err.Error(), Field: fmt.Sprintf("items[%d]", i), Rule: "json"}
		}
		ips.json = js
		ips.id = it.IdempotencyKey()
		if ips.id == "" {
			ips.id = ps.id + "/" + strconv.Itoa(i)
		}
		switch ips.class {
		case ir.ClassFact:
			if o := p.factReused(ips); o != nil {
				return Ack{ID: ps.id, Status: o.Status, Reason: fmt.Sprintf("items[%d]: %s", i, o.Reason), Field: fmt.Sprintf("items[%d].%s", i, o.Field), Rule: o.Rule}
			}
			facts = append(facts, ips)
			ack.ItemIDs = append(ack.ItemIDs, factCmdID(d.Name, ips.id))
		case ir.ClassRequest:
			reqs = append(reqs, ips)
			ack.ItemIDs = append(ack.ItemIDs, requestCmdID(ips.id))
		default:
			return Ack{ID: ps.id, Status: StatusRejected, Field: fmt.Sprintf("items[%d]", i), Rule: "class request|fact",
				Reason: fmt.Sprintf("receipt item type %q is class %s; items must be requests or facts", d.Name, ips.class)}
		}
	}
	if len(facts) > 0 {
		if err := p.acceptFacts(facts); err != nil {
			return Ack{ID: ps.id, Status: StatusUnavailable, Reason: err.Error(), Overloaded: errors.Is(err, ErrOutboxFull)}
		}
	}
	for _, r := range reqs {
		p.startRequest(context.Background(), r, true, false)
	}
	p.mu.Lock()
	p.trace0("receipt", ps.id, ps.desc.Name, fmt.Sprintf("received %d items", len(items)))
	p.mu.Unlock()
	return ack
}

// trace0 emits a trace event not tied to an entry (lock held).
func (p *Pipeline) trace0(stage, id, typ, detail string) {
	if p.cfg.Trace != nil {
		p.cfg.Trace(TraceEvent{Stage: stage, ID: id, Type: typ, Detail: detail})
	}
}

// ---- flush: evaluate → guard → append --------------------------------

// Flush takes the queued entries whose key latches are free, evaluates them
// in one Evaluator call, guards the results and proposes them as one batch.
// The background loop calls it; in Manual mode the driver does.
func (p *Pipeline) Flush(ctx context.Context) {
	p.mu.Lock()
	if p.flushing || p.log == nil || !p.started {
		p.mu.Unlock()
		return
	}
	p.flushing = true
	var now time.Time // read once, when an entry backs off
	batch := p.batchBuf[:0]
	bytes := 0
	clear(p.blocked)
	rest := p.queue[:0]
	for _, e := range p.queue {
		if e == nil || e.finished {
			continue
		}
		nb := e.notBefore()
		if !nb.IsZero() && now.IsZero() {
			now = p.clock.Now()
		}
		if now.Before(nb) {
			// Backing off: it does not hold up later entries on its keys
			// (their order does not matter; guards and CAS decide).
			rest = append(rest, e)
			continue
		}
		full := len(batch) >= p.cfg.MaxBatch || (len(batch) > 0 && bytes+len(e.json) > p.cfg.MaxBatchBytes)
		if full || !p.latchLocked(e) {
			// Keep per-key FIFO: later entries on these keys wait too.
			for _, k := range e.keys {
				p.blocked[k] = true
			}
			rest = append(rest, e)
			continue
		}
		e.queued = false
		e.inFlush = true
		bytes += len(e.json)
		batch = append(batch, e)
	}
	clear(p.queue[len(rest):])
	p.queue = rest
	log := p.log
	p.mu.Unlock()

	if len(batch) > 0 {
		p.process(ctx, log, batch) // ends the flush under its final lock
		return
	}
	p.mu.Lock()
	p.batchBuf = batch[:0]
	p.flushing = false
	p.mu.Unlock()
}

func (p *Pipeline) latchLocked(e *entry) bool {
	blocked := len(p.blocked) > 0
	for _, k := range e.keys {
		if h := p.latches[k]; (h != nil && h != e) || (blocked && p.blocked[k]) {
			p.mlatch(e)
			return false
		}
	}
	for _, k := range e.keys {
		p.latches[k] = e
	}
	e.held = true
	return true
}

func (p *Pipeline) unlatchLocked(e *entry) {
	if !e.held {
		return
	}
	for _, k := range e.keys {
		if p.latches[k] == e {
			delete(p.latches, k)
		}
	}
	e.held = false
	e.provisional = kv.Effect{}
}

func (p *Pipeline) process(ctx context.Context, log Log, batch []*entry) {
	items, evalIdx := p.itemsBuf[:0], p.idxBuf[:0]
	// The batch's commands under construction; when every entry proposes
	// (the usual case) this is the proposed batch itself.
	arena := make([]kv.Command, len(batch))
	p.flushLen = len(batch)
	for i, e := range batch {
		e.plan, e.planOut = planNone, nil
		e.cmd = &arena[i]
		if e.kind == kindConfig {
			p.planConfig(ctx, log, e)
			continue
		}
		if e.resolveKey() != "" {
			p.planResolve(ctx, log, e)
			continue
		}
		if ro := e.recordOnly(); ro != "" {
			*e.cmd = p.baseCmd(e, VerdictReject, guardInfo{Reason: ro})
			e.plan = planPropose
			continue
		}
		if p.planRecorded(log, e) {
			continue
		}
		if err := p.readState(ctx, log, e); err != nil {
			e.plan, e.planOut = planRetry, &Outcome{Status: StatusUnavailable, Reason: "reading state: " + err.Error()}
			continue
		}
		own, hasOwn := p.ownTransition(e)
		if hasOwn {
			e.verdict = own.Verdict
			switch own.Verdict {
			case VerdictApply:
			case VerdictDuplicate, VerdictStale:
				if p.cfg.Trace != nil {
					p.traceLocked("guard", e, 0, own.Verdict.String())
				}
				*e.cmd = p.baseCmd(e, own.Verdict, guardInfo{Transitions: []guardTransition{own}})
				if w, ok := recordWrite(&own); ok { // a newer order for the current state advances it
					e.cmd.Effect.Writes = []kv.Write{w}
				}
				e.plan = planPropose
				continue
			case VerdictReject:
				_, reason := p.decideOwn(e)
				p.traceLocked("guard", e, 0, "reject: "+reason)
				p.rejectConfirmed(ctx, log, e, reason)
				continue
			case VerdictQuarantine:
				_, reason := p.decideOwn(e)
				p.traceLocked("guard", e, 0, "quarantine: "+reason)
				p.quarantinePlan(ctx, log, e, own, reason)
				continue
			}
		}
		evalIdx = append(evalIdx, i)
		items = append(items, EvalItem{Type: e.typ, ID: e.userID, Payload: e.json, State: p.handlerState(e)})
		p.ownBuf = append(p.ownBuf, ownScratch{t: own, ok: hasOwn})
	}
	if len(items) > 0 {
		for _, i := range evalIdx {
			p.traceLocked("evaluate", batch[i], 0, "")
		}
		t0 := p.mstart()
		results, err := p.eval.Evaluate(ctx, items)
		p.mbatch(stageEvaluate, t0, batch)
		if err == nil && len(results) != len(items) {
			err = fmt.Errorf("evaluator returned %d results for %d items", len(results), len(items))
		}
		if err == nil {
			// One allocation for the writes of every command the batch
			// builds (handler writes plus machine records).
			n := 0
			for j := range results {
				n += len(results[j].Effect.Writes) + 1 + len(results[j].Transitions)
			}
			p.writeArena = make([]kv.Write, 0, n)
		}
		for j, i := range evalIdx {
			e := batch[i]
			if err != nil {
				e.plan, e.planOut = planRetry, &Outcome{Status: StatusUnavailable, Reason: "handler unavailable: " + err.Error()}
				continue
			}
			var own *guardTransition
			if p.ownBuf[j].ok {
				own = &p.ownBuf[j].t
			}
			p.applyResult(ctx, log, e, &results[j], own)
		}
	}
	nprop := 0
	for _, e := range batch {
		if e.plan == planPropose {
			nprop++
		}
	}
	var cmds []kv.Command
	if nprop == len(batch) {
		cmds = arena
	} else if nprop > 0 {
		cmds = make([]kv.Command, 0, nprop)
		for _, e := range batch {
			if e.plan == planPropose {
				cmds = append(cmds, *e.cmd)
			}
		}
	}
	var prop kv.Proposal
	var perr error
	if len(cmds) > 0 {
		t0 := p.mstart()
		prop, perr = log.Propose(ctx, cmds)
		p.mbatch(stageAppend, t0, batch)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var now time.Time // read when first needed
	var proposed []*entry
	await := prop != nil && !p.cfg.Manual
	for _, e := range batch {
		e.inFlush = false
		switch e.plan {
		case planPropose:
			if perr != nil {
				definite := errors.Is(perr, kv.ErrNoLeader) || errors.Is(perr, kv.ErrDropped)
				p.trace("propose", e, 0, "error: "+perr.Error())
				if definite || e.kind == kindFact || e.kind == kindConfig {
					p.retryLocked(e, Outcome{Status: StatusUnavailable, Reason: "not appended: " + perr.Error()})
				} else {
					p.timeoutLocked(e, "propose failed with an unknown outcome: "+perr.Error())
				}
				continue
			}
			e.proposed = true
			if e.receiptItem && !canaryReceiptDropped {
				if now.IsZero() {
					now = p.clock.Now()
				}
				p.armReceiptItemLocked(e, now)
			}
			if e.kind != kindRequest {
				// facts and config decisions are proposed again when
				// unconfirmed for a while (tick); requests have a deadline
				if now.IsZero() {
					now = p.clock.Now()
				}
				t := e.timing()
				t.proposedAt = now
				t.proposals++
			}
			e.provisional = e.cmd.Effect
			p.live[e.cmdID] = e
			if e.cmd.ID != e.cmdID {
				e.extra().altID = e.cmd.ID
				p.live[e.cmd.ID] = e
			}
			if p.cfg.Trace != nil {
				p.trace("propose", e, 0, fmt.Sprintf("attempt=%d writes=%d verdict=%s", e.attempt, len(e.cmd.Effect.Writes), Verdict(e.cmd.Verdict)))
			}
			if await {
				proposed = append(proposed, e)
			}
			if canaryReplyBeforeCommit && e.kind == kindRequest {
				p.finishLocked(e, Outcome{Status: StatusCommitted}) // canary build: reply at propose
			}
		case planFinish:
			p.finishLocked(e, *e.planOut)
		case planIdentity:
			if idx := e.planOut.Index; idx > p.applied && idx > log.Status().Applied {
				// The log's outcome table is ahead of this node's apply
				// notifications: do not reply before the apply (W1).
				p.unlatchLocked(e)
				if now.IsZero() {
					now = p.clock.Now()
				}
				e.timing().notBefore = now.Add(time.Millisecond)
				p.enqueueLocked(e, true)
				continue
			}
			if e.kind == kindFact {
				p.factDoneLocked(e, e.planOut.Index, "already applied")
				continue
			}
			if e.receiptItem {
				p.receiptItemAgainLocked(e) // no apply carries its outcome now
			}
			p.finishLocked(e, *e.planOut)
		case planRetry:
			p.retryLocked(e, *e.planOut)
		case planRequeue:
			p.unlatchLocked(e)
			p.enqueueLocked(e, true)
			p.wakeup()
		}
		e.cmd = nil
		e.state = nil
		if x := e.x; x != nil && x.late != nil {
			l := x.late
			x.late = nil
			p.resolveLocked(e, &l.cmd, l.res)
		}
		if x := e.x; x != nil && x.timeoutWhy != "" {
			why := x.timeoutWhy
			x.timeoutWhy = ""
			p.timeoutLocked(e, why)
		}
	}
	if await && !p.stopped {
		p.awaitWG.Add(1)
		go p.await(p.runCtx, prop, proposed, cmds)
	}
	// End the flush: its scratch is free for the next one.
	clear(items)
	p.itemsBuf, p.idxBuf = items[:0], evalIdx[:0]
	clear(p.ownBuf)
	p.ownBuf = p.ownBuf[:0]
	clear(p.stateArena)
	p.stateArena = p.stateArena[:0]
	p.writeArena, p.byteArena = nil, nil
	clear(batch)
	p.batchBuf = batch[:0]
	p.flushing = false
}

func (p *Pipeline) traceLocked(stage string, e *entry, idx uint64, d string) {
	if p.cfg.Trace == nil {
		return
	}
	p.mu.Lock()
	p.trace(stage, e, idx, d)
	p.mu.Unlock()
}

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
		if e := p.live[cmds[i].ID]; e != nil {
			p.resolveLocked(e, &cmds[i], res[i])
		}
	}
}

func (p *Pipeline) readState(ctx context.Context, log Log, e *entry) error {
	if cap(p.stateArena)-len(p.stateArena) < len(e.keys) {
		p.stateArena = make([]kv.Record, 0, max(256, 2*len(e.keys)))
	}
	n := len(p.stateArena)
	p.stateArena = p.stateArena[:n+len(e.keys)]
	st := p.stateArena[n : n+len(e.keys) : n+len(e.keys)]
	if sr, ok := log.(StateReader); ok {
		if err := sr.GetMany(ctx, e.keys, st); err != nil {
			return err
		}
		e.state = st
		return nil
	}
	for i, k := range e.keys {
		rec, ok, err := log.Get(ctx, k, false)
		if err != nil {
			return err
		}
		if !ok {
			rec = kv.Record{Key: k}
		}
		st[i] = rec
	}
	e.state = st
	return nil
}

func (e *entry) stateOf(key string) (kv.Record, bool) {
	for _, r := range e.state {
		if r.Key == key {
			return r, true
		}
	}
	return kv.Record{}, false
}

// handlerState is what the handler sees: every touched key except the
// conflict record.
func (p *Pipeline) handlerState(e *entry) []kv.Record {
	n := 0
	for _, r := range e.state {
		if !strings.HasPrefix(r.Key, ConflictPrefix) {
			n++
		}
	}
	if n == len(e.state) {
		return e.state
	}
	out := make([]kv.Record, 0, n)
	for _, r := range e.state {
		if !strings.HasPrefix(r.Key, ConflictPrefix) {
			out = append(out, r)
		}
	}
	return out
}

func (p *Pipeline) machineState(e *entry) (MachineRecord, bool, uint64, error) {
	rec, _ := e.stateOf(e.mkey)
	if rec.Rev == 0 {
		return MachineRecord{}, false, 0, nil
	}
	mr, err := parseMachineRecord(rec.Value, e.machine)
	return mr, true, rec.Rev, err
}

// ownTransition guards the entry's own transition (the `to` field).
func (p *Pipeline) ownTransition(e *entry) (guardTransition, bool) {
	if e.machine == nil || e.inst == "" {
		return guardTransition{}, false
	}
	to := e.payload.TargetState()
	if to == "" {
		return guardTransition{}, false
	}
	cur, exists, rev, err := p.machineState(e)
	in := incomingOf(e)
	v := illegalVerdict(e.class) // as decideOwn: an unreadable record is illegal
	if err == nil {
		v, _ = decide(e.machine, cur, exists, in, v, false)
	}
	return newGuardTransition(e.machine.Name, e.inst, rev, cur, exists, in, v), true
}

func (p *Pipeline) decideOwn(e *entry) (Verdict, string) {
	cur, exists, _, err := p.machineState(e)
	if err != nil {
		return illegalVerdict(e.class), err.Error()
	}
	return DecideIncoming(e.machine, cur, exists, incomingOf(e), illegalVerdict(e.class))
}

func (p *Pipeline) baseCmd(e *entry, v Verdict, g guardInfo) kv.Command {
	return p.baseCmdBuf(e, v, g, make([]byte, 0, g.size()))
}

// baseCmdBuf is baseCmd with the guard appended to buf (sized by g.size()).
func (p *Pipeline) baseCmdBuf(e *entry, v Verdict, g guardInfo, buf []byte) kv.Command {
	e.attempt = p.attempts.Add(1)
	g.Attempt = e.attempt
	guard := g.appendTo(buf[:0])
	return kv.Command{ID: e.cmdID, Type: e.typ, Class: uint8(e.class), Key: e.inst, Verdict: uint8(v),
		Guard: guard[:len(guard):len(guard)], Payload: e.json, Origin: p.cfg.NodeID}
}

func (p *Pipeline) rejectPlan(e *entry, reason string) {
	if e.receiptItem {
		// Nobody waits for a receipt item: record the rejection in the log
		// so the watch stream carries it (W4).
		e.extra().recordOnly = reason
		*e.cmd = p.baseCmd(e, VerdictReject, guardInfo{Reason: reason})
		e.plan = planPropose
		return
	}
	e.plan, e.planOut = planFinish, &Outcome{Status: StatusRejected, Reason: reason, Verdict: VerdictReject}
}

// rejectConfirmed rejects a request only after a linearizable re-read shows
// that the state the rejection was based on is current: a node whose applied
// state lags the log must not answer REJECTED from stale state. If a key
// moved, the entry is evaluated again.
func (p *Pipeline) rejectConfirmed(ctx context.Context, log Log, e *entry, reason string) {
	for i, r := range e.state {
		cur, ok, err := log.Get(ctx, r.Key, i == 0)
		if err != nil {
			e.plan, e.planOut = planRetry, &Outcome{Status: StatusUnavailable, Reason: "cannot confirm the rejection against current state: " + err.Error()}
			return
		}
		if !ok {
			cur.Rev = 0
		}
		if cur.Rev != r.Rev {
			e.conflicts++
			if int(e.conflicts) > p.cfg.MaxConflicts {
				e.plan, e.planOut = planRetry, &Outcome{Status: StatusUnavailable, Reason: "state kept moving while confirming a rejection"}
				return
			}
			p.traceLocked("requeue", e, 0, "rejection not confirmed: "+r.Key+" is behind; re-evaluate")
			e.plan = planRequeue
			return
		}
	}
	p.rejectPlan(e, reason)
}

// applyResult turns a handler result into a command (evaluate → guard).
// own is the entry's own transition as guarded before evaluation (nil when
// it has none); the state it was decided on is still e.state.
func (p *Pipeline) applyResult(ctx context.Context, log Log, e *entry, r *EvalResult, own *guardTransition) {
	if r.Err != nil {
		switch r.Err.Kind {
		case EvalUnavailable:
			e.plan, e.planOut = planRetry, &Outcome{Status: StatusUnavailable, Reason: r.Err.Error()}
		case EvalInternal:
			if e.kind == kindFact {
				e.plan, e.planOut = planRetry, &Outcome{Status: StatusUnavailable, Reason: r.Err.Error()}
			} else {
				p.rejectPlan(e, "handler internal error: "+r.Err.Msg)
			}
		default:
			// One decision (decision.go): a refused entry moves no
			// machine; a refused fact is quarantined, and retained.
			p.declinedPlan(ctx, log, e, own, r.Err.Msg)
		}
		return
	}
	if len(r.NeedKeys) > 0 {
		if e.rounds >= 4 {
			p.rejectPlan(e, "handler kept asking for more keys")
			return
		}
		e.rounds++
		for _, k := range r.NeedKeys {
			if _, ok := e.stateOf(k); !ok {
				e.keys = append(e.keys, k)
			}
		}
		e.plan = planRequeue
		return
	}
	if own != nil && own.Verdict == VerdictApply && handlerIgnored(r) {
		p.declinedPlan(ctx, log, e, own, ignoredReason(own))
		return
	}
	need := len(r.Effect.Writes) + 1 + len(r.Transitions)
	var writes []kv.Write
	if n := len(p.writeArena); cap(p.writeArena)-n >= need {
		writes = p.writeArena[n : n : n+need]
		p.writeArena = p.writeArena[:n+need]
	} else {
		writes = make([]kv.Write, 0, need)
	}
	// Machine record writes get their values, and the command its guard,
	// from one buffer once every transition is decided.
	var mwBuf [2]int
	mw := mwBuf[:0] // writes[mw[k]] is the record of g.Transitions[mt[k]]
	var mtBuf [2]int
	mt := mtBuf[:0]
	for _, w := range r.Effect.Writes {
		if w.Key == "" || len(w.Key) > MaxKeyBytes {
			p.handlerBroke(e, fmt.Sprintf("handler wrote a key of %d bytes (1..%d allowed)", len(w.Key), MaxKeyBytes))
			return
		}
		if strings.HasPrefix(w.Key, "_") {
			p.handlerBroke(e, fmt.Sprintf("handler wrote reserved key %q (keys starting with _ belong to writ)", w.Key))
			return
		}
		w.Unconditional = false
		if rec, ok := e.stateOf(w.Key); ok {
			w.IfRev = rec.Rev
		}
		writes = append(writes, w)
	}
	var tbuf [2]guardTransition
	g := guardInfo{Transitions: tbuf[:0]}
	verdict := VerdictNone
	if own != nil {
		if own.Verdict != VerdictApply {
			// state moved under us (cannot happen under latches); retry
			e.plan = planRequeue
			return
		}
		g.Transitions = append(g.Transitions, *own)
		mw, mt = append(mw, len(writes)), append(mt, len(g.Transitions)-1)
		writes = append(writes, kv.Write{Key: e.mkey, IfRev: own.ExpectRev})
		verdict = VerdictApply
	}
	for _, tr := range r.Transitions {
		m, ok := p.cat.Machine(tr.Machine)
		if !ok {
			p.handlerBroke(e, fmt.Sprintf("handler transition names undeclared machine %q", tr.Machine))
			return
		}
		key := MachineKey(tr.Machine, tr.Key)
		rec, ok := e.stateOf(key)
		if !ok {
			var found bool
			var err error
			rec, found, err = log.Get(ctx, key, false)
			if err != nil {
				e.plan, e.planOut = planRetry, &Outcome{Status: StatusUnavailable, Reason: "reading state: " + err.Error()}
				return
			}
			if !found {
				rec = kv.Record{Key: key}
			}
		}
		var cur MachineRecord
		exists := rec.Rev != 0
		if exists {
			var err error
			if cur, err = ParseMachineRecord(rec.Value); err != nil {
				p.handlerBroke(e, err.Error())
				return
			}
		}
		v, reason := Decide(m, cur, exists, tr.To, 0, false, illegalVerdict(e.class))
		t := newGuardTransition(tr.Machine, tr.Key, rec.Rev, cur, exists, Incoming{To: tr.To}, v)
		switch v {
		case VerdictApply:
			g.Transitions = append(g.Transitions, t)
			mw, mt = append(mw, len(writes)), append(mt, len(g.Transitions)-1)
			writes = append(writes, kv.Write{Key: key, IfRev: t.ExpectRev})
			if verdict == VerdictNone {
				verdict = VerdictApply
			}
		case VerdictDuplicate, VerdictStale:
			g.Transitions = append(g.Transitions, t)
		case VerdictReject:
			p.traceLocked("guard", e, 0, "reject transition: "+reason)
			p.rejectConfirmed(ctx, log, e, reason)
			return
		case VerdictQuarantine:
			p.traceLocked("guard", e, 0, "quarantine transition: "+reason)
			p.quarantinePlan(ctx, log, e, t, reason)
			return
		}
	}
	if p.cfg.Trace != nil {
		p.traceLocked("guard", e, 0, verdict.String())
	}
	size := g.size()
	for _, ti := range mt {
		size += machineRecordSize(&g.Transitions[ti])
	}
	buf := p.flushBytes(size)
	for k, wi := range mw {
		start := len(buf)
		buf = nextMachineRecord(&g.Transitions[mt[k]]).AppendJSON(buf)
		writes[wi].Value = buf[start:len(buf):len(buf)]
	}
	*e.cmd = p.baseCmdBuf(e, verdict, g, buf[len(buf):])
	e.cmd.Effect.Writes = writes
	e.result = r.Result
	e.plan = planPropose
}

// flushBytes returns an empty buffer with room for n bytes, carved from
// the flush's byte arena (machine record values and guards of the commands
// it builds). Appending beyond n moves to a new array, as append does.
func (p *Pipeline) flushBytes(n int) []byte {
	if cap(p.byteArena)-len(p.byteArena) < n {
		p.byteArena = make([]byte, 0, max(n, min(p.flushLen*128, 64<<10)))
	}
	off := len(p.byteArena)
	p.byteArena = p.byteArena[:off+n]
	return p.byteArena[off : off : off+n]
}

func (p *Pipeline) handlerBroke(e *entry, msg string) {
	p.lg.Error("pipeline: handler returned a malformed result", "type", e.typ, "id", e.userID, "err", msg)
	if e.kind == kindFact {
		e.plan, e.planOut = planRetry, &Outcome{Status: StatusUnavailable, Reason: msg}
		return
	}
	p.rejectPlan(e, "handler internal error: "+msg)
}

func machineWrite(t guardTransition) kv.Write {
	return kv.Write{Key: MachineKey(t.Machine, t.Instance), Value: nextMachineRecord(&t).AppendJSON(nil), IfRev: t.ExpectRev}
}

// machineRecordSize bounds the encoding of the record t writes (quoting
// unusual state names can exceed it; append then grows the buffer).
func machineRecordSize(t *guardTransition) int {
	return len(`{"state":"","order":}`) + len(t.To) + 20
}

// ---- completion ------------------------------------------------------

// finishLocked delivers the outcome to the requester (the reply stage).
func (p *Pipeline) finishLocked(e *entry, out Outcome) {
	if e.replied {
		return
	}
	if out.Status == StatusCommitted && out.Index > p.applied {
		if st := p.log.Status(); out.Index > st.Applied {
			panic(fmt.Sprintf("pipeline: W1 violated: reply for %s at index %d before local apply (applied %d)", e.cmdID, out.Index, p.applied))
		}
	}
	out.ID, out.Type = e.userID, e.typ
	if e.receiptItem && out.Status != StatusCommitted && out.Index == 0 {
		// Nobody waits for a receipt item and nothing was recorded in the
		// log: say so loudly, and put the outcome on the watch stream
		// (receipt.go), the only place the scheduler looks.
		p.lg.Warn("pipeline: receipt item not appended", "request_id", e.userID, "type", e.typ, "status", out.Status.String(), "reason", out.Reason)
		p.receiptItemEventLocked(e, out)
	}
	if out.Verdict == VerdictNone && out.Status == StatusCommitted {
		out.Verdict = e.verdict
	}
	e.replied = true
	e.out = out
	p.mfinished(e, out)
	if e.kind != kindConfig || out.Status != StatusUncertain {
		e.finished = true
		p.unlatchLocked(e)
		p.dropLiveLocked(e)
	}
	switch e.kind {
	case kindRequest:
		p.outcomes.put(e.cmdID, out)
	case kindConfig:
		p.outcomes.put(configCmdID(e.userID, "stage"), out)
	}
	if p.cfg.Trace != nil {
		p.trace("reply", e, out.Index, out.String())
	}
	if e.done != nil {
		close(e.done)
	}
	e.answered.Store(true)
	p.wakeup()
}

func (p *Pipeline) dropLiveLocked(e *entry) {
	if e.kind == kindConfig {
		for _, ph := range []string{"stage", "activate", "abort"} {
			if p.live[configCmdID(e.userID, ph)] == e {
				delete(p.live, configCmdID(e.userID, ph))
			}
		}
		return
	}
	if p.live[e.cmdID] == e {
		delete(p.live, e.cmdID)
	}
	if alt := e.altID(); alt != "" && p.live[alt] == e {
		delete(p.live, alt)
	}
}

// retryLocked handles a transient failure: requests answer UNAVAILABLE
// (definitely not applied); facts and config decisions back off and retry.
func (p *Pipeline) retryLocked(e *entry, out Outcome) {
	p.unlatchLocked(e)
	e.proposed = false
	if e.kind == kindRequest {
		if e.everApplied {
			out = Outcome{Status: StatusUncertain, Reason: out.Reason}
		}
		p.finishLocked(e, out)
		return
	}
	t := e.timing()
	if t.backoff == 0 {
		t.backoff = p.cfg.RetryMin
	} else if t.backoff *= 2; t.backoff > p.cfg.RetryMax {
		t.backoff = p.cfg.RetryMax
	}
	t.notBefore = p.clock.Now().Add(t.backoff)
	p.trace("retry", e, 0, fmt.Sprintf("in %s: %s", t.backoff, out.Reason))
	p.enqueueLocked(e, false)
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
	if e.proposed {
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
		return
	}
	p.finishLocked(e, Outcome{Status: StatusUnavailable, Reason: why + "; not appended"})
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

// confirmFacts looks up (outside the lock) the log's recorded outcome of
// the given facts and retires those applied here. Restored calls it for the
// facts whose proposal is unconfirmed when the node installs a snapshot: the
// entries a snapshot covers are never reported one by one, and without
// this such a fact (and every later fact on its keys) could wait a full
// CommitTimeout before being re-proposed.
func (p *Pipeline) confirmFacts(ids []string) {
	p.mu.Lock()
	log := p.log
	p.mu.Unlock()
	var hits []kv.Result
	var hitIDs []string
	for _, id := range ids {
		if r, ok := log.Outcome(id); ok && (r.Status == kv.StatusApplied || r.Status == kv.StatusDuplicate) {
			hits, hitIDs = append(hits, r), append(hitIDs, id)
		}
	}
	if len(hits) == 0 {
		return
	}
	applied := log.Status().Applied
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, r := range hits {
		e := p.live[hitIDs[i]]
		if e == nil || e.finished || e.inFlush || r.Index > applied {
			continue
		}
		p.trace("apply", e, r.Index, "confirmed from the log's recorded outcome")
		p.factDoneLocked(e, r.Index, "done")
	}
}

func hasLeader(st kv.LogStatus) bool { return st.IsLeader || st.LeaderID != "" }

// leaderChangeLocked releases retained facts when the log has a leader
// again or a new one (W3): a fact backing off from a leaderless period is
// proposed now rather than when its backoff expires, and a fact whose
// proposal is unconfirmed is proposed again now, because a proposal
// forwarded to a leader that died is silently lost and would otherwise
// hold its keys' latches (and every later fact on them) until the commit
// timeout. Proposing a fact twice is harmless: application is deduplicated
// by fact ID, and only the latest attempt's failed precondition counts.
func (p *Pipeline) leaderChangeLocked(now time.Time) {
	if p.log == nil || !p.started {
		return
	}
	st := p.log.Status()
	has := hasLeader(st)
	changed := st.Term != p.seenTerm || st.LeaderID != p.seenLeader || has != p.seenHas
	p.seenTerm, p.seenLeader, p.seenHas = st.Term, st.LeaderID, has
	if !changed || !has {
		return
	}
	released := 0
	for _, e := range p.live {
		if e.kind != kindFact || e.finished || e.inFlush {
			continue
		}
		switch {
		case e.proposed:
			p.unlatchLocked(e)
			e.proposed = false
			t := e.timing()
			t.backoff, t.notBefore = 0, time.Time{}
			p.enqueueLocked(e, false)
			released++
		case e.queued && now.Before(e.notBefore()):
			t := e.t // set: notBefore is in the future
			t.backoff, t.notBefore = 0, time.Time{}
			released++
		default:
			if e.t != nil {
				e.t.backoff = 0
			}
		}
	}
	if released > 0 {
		p.trace0("leader", "", "", fmt.Sprintf("term %d leader %q: %d retained facts proposed now", st.Term, st.LeaderID, released))
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
	moved := res.Status == kv.StatusConflict || strings.Contains(res.Reason, errGuardMovedText)
	if moved && e.kind == kindFact {
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
	if moved {
		e.conflicts++
		if int(e.conflicts) > p.cfg.MaxConflicts {
			p.retryLocked(e, Outcome{Status: StatusUnavailable, Reason: fmt.Sprintf("preconditions failed %d times (contention on %s); not applied", e.conflicts, res.Reason)})
			return
		}
		p.unlatchLocked(e)
		p.trace("requeue", e, res.Index, "re-evaluate against new state")
		p.enqueueLocked(e, true)
		p.wakeup()
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

// factDoneLocked retires a committed fact from the outbox.
func (p *Pipeline) factDoneLocked(e *entry, index uint64, why string) {
	p.mfactDone(e, strings.HasPrefix(why, "vetoed"))
	e.finished = true
	p.unlatchLocked(e)
	p.dropLiveLocked(e)
	if err := p.outbox.Done(e.cmdID); err != nil {
		p.lg.Error("pipeline: outbox done record failed", "id", e.cmdID, "err", err)
	}
	p.trace("outbox", e, index, why)
	p.wakeup()
}

// ---- queries ---------------------------------------------------------
