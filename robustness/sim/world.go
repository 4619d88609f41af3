package sim

import (
	"container/heap"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/writ-dev/writ/pipeline"
)

// Config is one run's shape; ConfigFor draws it from the seed.
type Config struct {
	Seed           int64
	Nodes          int
	Tick           time.Duration // raft tick
	ElectionTicks  int
	HeartbeatTicks int
	SnapshotCount  uint64
	// SnapshotCatchUp entries stay in the log behind a snapshot.
	SnapshotCatchUp uint64
	CommitTimeout   time.Duration
	// FaultPhase is how long faults are injected and clients start new
	// requests; then everything heals and the run waits (at most
	// HealTimeout) for the nodes to converge and every request to finish.
	FaultPhase  time.Duration
	HealTimeout time.Duration
	Clients     int
	// Faults is the number of discrete faults (crash, partition) in the
	// fault phase; Drop, Dup and Reorder are message fault rates then.
	Faults             int
	Drop, Dup, Reorder float64
	// Dir holds each node's (empty) fact outbox file.
	Dir string
}

// ConfigFor draws a run's configuration from its seed.
func ConfigFor(seed int64, dir string) Config {
	r := rand.New(rand.NewSource(seed))
	pick := func(xs ...int) int { return xs[r.Intn(len(xs))] }
	c := Config{
		Seed: seed, Nodes: pick(3, 3, 3, 3, 3, 5), Tick: 10 * time.Millisecond,
		ElectionTicks: pick(5, 8, 10), HeartbeatTicks: 1,
		SnapshotCount: uint64(pick(5, 12, 40, 10000)),
		CommitTimeout: time.Duration(pick(150, 300, 600)) * time.Millisecond,
		FaultPhase:    time.Duration(pick(500, 700, 900)) * time.Millisecond,
		HealTimeout:   30 * time.Second,
		Clients:       pick(2, 3),
		Faults:        pick(1, 2, 3, 4),
		Drop:          []float64{0, 0.02, 0.1}[r.Intn(3)],
		Dup:           []float64{0, 0.02, 0.08}[r.Intn(3)],
		Reorder:       []float64{0, 0.05, 0.2}[r.Intn(3)],
		Dir:           dir,
	}
	c.SnapshotCatchUp = uint64(pick(0, 2, 5))
	if c.SnapshotCatchUp > c.SnapshotCount {
		c.SnapshotCatchUp = c.SnapshotCount
	}
	return c
}

// Stats counts what a run did.
type Stats struct {
	Events, Messages, Writes, Fsyncs, Applies int
	Snapshots, SnapshotsInstalled             int
	LostWrites                                int // unsynced disk writes lost in crashes
	Faults                                    map[string]int
	Requests, Attempts, Acked                 int
	Outcomes                                  map[string]int
	SimTime                                   time.Duration
}

// Result is one run's outcome.
type Result struct {
	Config     Config
	Digest     string // of the whole trace: equal seeds give equal digests
	Violations []string
	Stats      Stats
}

// World is one run: nodes, network, clients and the event queue, all
// driven from one seeded source on one goroutine.
type World struct {
	cfg      Config
	rng      *rand.Rand
	raftRand *rand.Rand // raft's election timeout draws (randhook.go)
	now      time.Duration
	seq      uint64
	events   eventHeap
	clock    *clock
	cat      *catalog
	outboxes []*pipeline.Outbox
	nodes    []*node
	net      *network
	clients  []*client
	healed   bool
	panicked bool
	trace    hash.Hash
	buf      [24]byte
	stats    Stats
	res      *Result
	checks   checker
}

type event struct {
	at  time.Duration
	seq uint64
	fn  func()
}

type eventHeap []*event

func (h eventHeap) Len() int { return len(h) }
func (h eventHeap) Less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	return h[i].seq < h[j].seq
}
func (h eventHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *eventHeap) Push(x any)   { *h = append(*h, x.(*event)) }
func (h *eventHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// after schedules fn d from now.
func (w *World) after(d time.Duration, fn func()) {
	w.seq++
	heap.Push(&w.events, &event{at: w.now + d, seq: w.seq, fn: fn})
}

// clock is the pipeline's clock: simulated time from a fixed epoch.
type clock struct{ w *World }

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func (c *clock) Now() time.Time { return epoch.Add(c.w.now) }
func (c *clock) After(d time.Duration) <-chan time.Time {
	ch := make(chan time.Time, 1)
	c.w.after(d, func() { ch <- c.Now() })
	return ch
}

func (w *World) netDelay() time.Duration {
	return 200*time.Microsecond + time.Duration(w.rng.Int63n(int64(3*time.Millisecond)))
}

func (w *World) fsyncDelay() time.Duration {
	if w.rng.Intn(20) == 0 {
		return time.Duration(5+w.rng.Intn(30)) * time.Millisecond // a slow fsync
	}
	return 300*time.Microsecond + time.Duration(w.rng.Int63n(int64(3*time.Millisecond)))
}

func (w *World) applyDelay() time.Duration {
	return time.Duration(w.rng.Int63n(int64(500 * time.Microsecond)))
}

// traceEvent adds one event to the trace digest.
func (w *World) traceEvent(kind string, a, b uint64) {
	binary.BigEndian.PutUint64(w.buf[0:], uint64(w.now))
	binary.BigEndian.PutUint64(w.buf[8:], a)
	binary.BigEndian.PutUint64(w.buf[16:], b)
	w.trace.Write([]byte(kind))
	w.trace.Write(w.buf[:])
}

// fail records a violation of the simulation's own expectations.
func (w *World) fail(format string, a ...any) {
	w.violate("sim", format, a...)
}

func (w *World) violate(check, format string, a ...any) {
	if len(w.res.Violations) < 50 {
		w.res.Violations = append(w.res.Violations, check+": "+fmt.Sprintf(format, a...)+fmt.Sprintf(" (at %s)", w.now))
	}
}

func (w *World) nameOf(id uint64) string {
	if i := int(id) - 1; i >= 0 && i < len(w.nodes) {
		return w.nodes[i].name
	}
	return fmt.Sprintf("raft-%d", id)
}

// Run runs one seed's configuration to its end and checks it.
func Run(cfg Config) *Result {
	w := &World{cfg: cfg, rng: rand.New(rand.NewSource(cfg.Seed)), raftRand: rand.New(rand.NewSource(cfg.Seed ^ 0x5eed)),
		trace: sha256.New(), cat: newCatalog(), res: &Result{Config: cfg}}
	w.stats.Faults, w.stats.Outcomes = map[string]int{}, map[string]int{}
	w.clock = &clock{w}
	w.checks.init(w)
	unbind := bindRand(w.raftRand)
	defer unbind()
	defer w.closeOutboxes()
	if err := w.setup(); err != nil {
		w.fail("setup: %v", err)
		return w.finish()
	}
	w.loop()
	w.checks.final()
	return w.finish()
}

func (w *World) setup() error {
	w.net = &network{w: w, cut: make([][]bool, w.cfg.Nodes)}
	for i := range w.cfg.Nodes {
		w.net.cut[i] = make([]bool, w.cfg.Nodes)
		ob, _, err := pipeline.OpenOutbox(filepath.Join(w.cfg.Dir, fmt.Sprintf("n%d", i+1)))
		if err != nil {
			return err
		}
		w.outboxes = append(w.outboxes, ob)
		w.nodes = append(w.nodes, &node{w: w, idx: i, id: uint64(i + 1), name: fmt.Sprintf("n%d", i+1)})
	}
	for _, n := range w.nodes {
		if err := n.start(); err != nil {
			return err
		}
		w.scheduleTicks(n)
	}
	w.scheduleFaults()
	for i := range w.cfg.Clients {
		c := &client{w: w, id: i}
		w.clients = append(w.clients, c)
		w.after(time.Duration(w.rng.Int63n(int64(100*time.Millisecond))), c.next)
	}
	w.after(w.cfg.FaultPhase, w.heal)
	return nil
}

func (w *World) closeOutboxes() {
	for _, ob := range w.outboxes {
		_ = ob.Close()
	}
	if w.cfg.Dir != "" {
		_ = os.RemoveAll(w.cfg.Dir)
	}
}

// scheduleTicks ticks the node's raft every Tick and its pipeline every
// 25 ms, from a phase drawn from the seed.
func (w *World) scheduleTicks(n *node) {
	var tick, ptick func()
	tick = func() {
		if n.up {
			n.rn.Tick()
		}
		w.after(w.cfg.Tick, tick)
	}
	ptick = func() {
		if n.up {
			n.pl.Tick()
		}
		w.after(25*time.Millisecond, ptick)
	}
	w.after(time.Duration(w.rng.Int63n(int64(w.cfg.Tick))), tick)
	w.after(time.Duration(w.rng.Int63n(int64(10*time.Millisecond))), ptick)
}

// loop runs events until the run is over: converged after heal, or the
// heal timeout.
func (w *World) loop() {
	deadline := w.cfg.FaultPhase + w.cfg.HealTimeout
	for w.events.Len() > 0 {
		ev := heap.Pop(&w.events).(*event)
		if ev.at > deadline {
			w.violate("converged", "not converged %s after heal: %s", w.cfg.HealTimeout, w.convergeState())
			return
		}
		w.now = ev.at
		w.stats.Events++
		if !w.step(ev) {
			return
		}
		if w.healed && w.converged() {
			return
		}
	}
}

// step runs one event and what follows from it at the same instant. A
// panic (raft's own assertions: a log that lost what it promised) is a
// violation and ends the run.
func (w *World) step(ev *event) (ok bool) {
	defer func() {
		if p := recover(); p != nil {
			w.violate("no-panic", "%v", p)
			w.panicked = true
			ok = false
		}
	}()
	ev.fn()
	w.drain()
	w.pollClients()
	return true
}

// drain lets every node's pipeline flush and raft emit its Readys until
// nothing is left to do at this instant.
func (w *World) drain() {
	for range 1000 {
		busy := false
		for _, n := range w.nodes {
			if !n.up {
				continue
			}
			n.pl.Flush(bg)
			for n.up && n.ready() {
				busy = true
			}
		}
		if !busy {
			return
		}
	}
	w.fail("drain did not settle")
}

func (w *World) finish() *Result {
	w.stats.SimTime = w.now
	w.res.Stats = w.stats
	w.res.Digest = fmt.Sprintf("%x", w.trace.Sum(nil)[:12])
	return w.res
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

var bg = context.Background()
