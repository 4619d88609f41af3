package raftstore

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"sync"
	"time"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/writ-dev/writ/kv"
)

// The deterministic simulation (see docs/robustness.md, "Deterministic
// simulation"): nodes of this package run in one goroutine, and the world
// performs, one step at a time, what their goroutines and the network would
// do, in an order drawn from one seed: a Ready-loop round (handleReady), an
// appender round (persist), an applier round (applyTasks), a tick, the
// delivery of an in-flight message, a client proposal, a crash, a restart,
// a partition or a heal. Those rounds are the node's own code; only the
// transport, the WAL and snapshot files and the clock are simulated
// (seams.go). etcd raft draws its randomised election timeouts from
// crypto/rand, so the world replaces crypto/rand.Reader with a stream from
// the seed for the length of a run; runs therefore never overlap.

// simPlan is the configuration and fault plan of one run, drawn from its seed.
type simPlan struct {
	nodes         int
	steps         int // steps with faults; then the world heals and settles
	proposals     int // client proposals to make at most
	drop, dup     float64
	maxDelay      int     // steps
	crash         float64 // per step: crash a node (between rounds)
	crashInSave   float64 // per fsync: crash inside Save, before the fsync
	partition     float64 // per step: cut a node off, or heal
	snapshotCount uint64
}

func drawPlan(rng *rand.Rand, short bool) simPlan {
	p := simPlan{
		nodes:         3,
		steps:         1500 + rng.IntN(1500),
		proposals:     30 + rng.IntN(50),
		drop:          []float64{0, 0.02, 0.1}[rng.IntN(3)],
		dup:           []float64{0, 0.02, 0.1}[rng.IntN(3)],
		maxDelay:      []int{0, 3, 20}[rng.IntN(3)],
		crash:         []float64{0, 0.001, 0.004}[rng.IntN(3)],
		crashInSave:   []float64{0, 0.01, 0.05}[rng.IntN(3)],
		partition:     []float64{0, 0.002, 0.006}[rng.IntN(3)],
		snapshotCount: []uint64{8, 25, 10000}[rng.IntN(3)],
	}
	if rng.IntN(4) == 0 {
		p.nodes = 5
	}
	if short {
		p.steps /= 2
		p.proposals /= 2
	}
	return p
}

type simNode struct {
	name string
	rid  uint64
	dir  string
	disk *simDisk
	ep   *simEndpoint
	n    *Node // nil while crashed
	// req continues the node's request numbers across restarts, so that
	// entries are the same bytes in every run of a seed.
	req uint64
}

type pendingProposal struct {
	p     *proposal
	node  *simNode
	id    string
	key   string
	value string
}

type ackedCommand struct {
	node  string
	index uint64
	key   string
	value string
}

type world struct {
	seed   uint64
	plan   simPlan
	rng    *rand.Rand
	ctx    context.Context
	step   int
	now    time.Time
	nodes  []*simNode
	byID   map[uint64]*simNode
	net    *simNet
	peers  []Peer
	cutOff map[uint64]bool // nodes partitioned from all others
	oneWay [2]uint64       // a one-way cut: from oneWay[0] to oneWay[1]
	faults bool            // faults are on (off while settling)

	pending  []pendingProposal
	acked    map[string]ackedCommand
	proposed int
	ck       *simChecker
	stats    simStats

	trace  []string
	traced hash.Hash // of every trace line: equal for equal runs
	fail   error
}

type simStats struct {
	crashes, crashesInSave, partitions, acks, elections int
}

func newWorld(seed uint64, short bool, dir string) *world {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	w := &world{
		seed:   seed,
		rng:    rng,
		ctx:    context.Background(),
		now:    time.Unix(1_700_000_000, 0),
		byID:   map[uint64]*simNode{},
		cutOff: map[uint64]bool{},
		acked:  map[string]ackedCommand{},
		faults: true,
		traced: sha256.New(),
	}
	w.plan = drawPlan(rng, short)
	w.net = &simNet{w: w}
	w.ck = newSimChecker(w)
	for i := range w.plan.nodes {
		name := fmt.Sprintf("n%d", i+1)
		sd := &simNode{name: name, rid: RaftID(name), dir: fmt.Sprintf("%s/%s", dir, name), disk: &simDisk{}, req: uint64(i+1) << 40}
		sd.disk.crashInSave = func() bool { return w.faults && w.chance(w.plan.crashInSave) }
		w.nodes = append(w.nodes, sd)
		w.byID[sd.rid] = sd
		w.peers = append(w.peers, Peer{ID: name, Addr: name + ":1"})
	}
	return w
}

func (w *world) chance(p float64) bool { return p > 0 && w.rng.Float64() < p }

func (w *world) tracef(format string, args ...any) {
	const keep = 200
	if len(w.trace) >= 2*keep {
		w.trace = append(w.trace[:0], w.trace[keep:]...)
	}
	line := fmt.Sprintf("%6d ", w.step) + fmt.Sprintf(format, args...)
	w.trace = append(w.trace, line)
	w.traced.Write([]byte(line))
}

func (w *world) failf(format string, args ...any) {
	if w.fail == nil {
		w.fail = fmt.Errorf("step %d: "+format, append([]any{w.step}, args...)...)
		w.tracef("FAIL: %v", w.fail)
	}
}

// cut reports whether messages from a to b are lost to a partition.
func (w *world) cut(a, b uint64) bool {
	return w.cutOff[a] || w.cutOff[b] || (w.oneWay[0] == a && w.oneWay[1] == b)
}

// simRand is crypto/rand.Reader while simulations run: each run's
// goroutine reads the stream of its own seed (raft reads it only from the
// goroutine that steps it, which is the run's), any other goroutine the
// system's reader. So runs can go in parallel and stay deterministic.
type simRand struct {
	mu      sync.Mutex
	streams map[uint64]*rand.ChaCha8
	users   int
	prev    io.Reader
}

var simRandom = &simRand{streams: map[uint64]*rand.ChaCha8{}}

func (s *simRand) Read(p []byte) (int, error) {
	g := goroutineID()
	s.mu.Lock()
	r, ok := s.streams[g]
	if ok {
		defer s.mu.Unlock()
		return r.Read(p)
	}
	prev := s.prev
	s.mu.Unlock()
	return prev.Read(p)
}

// attach gives the calling goroutine the stream of seed until detach.
func (s *simRand) attach(seed uint64) (detach func()) {
	var key [32]byte
	for i := range 8 {
		key[i] = byte(seed >> (8 * i))
	}
	g := goroutineID()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.users == 0 {
		s.prev = crand.Reader
		crand.Reader = s
	}
	s.users++
	s.streams[g] = rand.NewChaCha8(key)
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.streams, g)
		if s.users--; s.users == 0 {
			crand.Reader = s.prev
		}
	}
}

// goroutineID is the calling goroutine's number, from its stack header.
func goroutineID() uint64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	if i := bytes.IndexByte(b, ' '); i > 0 {
		b = b[:i]
	}
	id, _ := strconv.ParseUint(string(b), 10, 64)
	return id
}

// run runs the world to its end and returns the first failed check. The
// whole run is on the calling goroutine.
func (w *world) run() error {
	defer simRandom.attach(w.seed)()
	defer w.closeAll()

	for _, sd := range w.nodes {
		w.start(sd)
	}
	for w.fail == nil && w.step < w.plan.steps {
		w.tick()
	}
	if w.fail == nil {
		w.settle()
	}
	if w.fail == nil {
		w.ck.final()
	}
	return w.fail
}

func (w *world) tick() {
	w.step++
	w.now = w.now.Add(time.Millisecond)
	w.act()
	w.net.runReports()
	w.ck.afterStep()
}

func (w *world) config(sd *simNode) Config {
	return Config{
		NodeID:          sd.name,
		DataDir:         sd.dir,
		RaftAddr:        sd.name + ":1",
		Peers:           w.peers,
		TickInterval:    10 * time.Millisecond,
		ElectionTicks:   10,
		HeartbeatTicks:  1,
		SnapshotCount:   w.plan.snapshotCount,
		SnapshotCatchUp: w.plan.snapshotCount / 2,
		Logger:          slog.New(slog.DiscardHandler),
		Observer:        &simObserver{ck: w.ck, node: sd.name},
		hooks: &testHooks{sim: &simHooks{
			net:  sd.ep,
			disk: sd.disk,
			now:  func() time.Time { return w.now },
		}},
	}
}

func (w *world) start(sd *simNode) {
	if err := os.MkdirAll(sd.dir, 0o700); err != nil {
		w.failf("%s: %v", sd.name, err)
		return
	}
	sd.ep = &simEndpoint{net: w.net, self: sd.rid, peers: map[uint64]bool{}, members: map[uint64]bool{}}
	n, err := Start(w.config(sd))
	if err != nil {
		w.failf("%s: start: %v", sd.name, err)
		return
	}
	n.reqSeq.Store(sd.req)
	sd.n = n
	w.tracef("%s started (applied %d)", sd.name, n.applied.Load())
}

// crash kills a node between (or, from Save, inside) its rounds: the state
// loses its open transaction, the disk what was not synced.
func (w *world) crash(sd *simNode, inSave bool) {
	n := sd.n
	sd.req = n.reqSeq.Load()
	sd.ep.close()
	n.st.wmu.Lock()
	n.st.rollbackLocked()
	n.st.wmu.Unlock()
	if err := n.st.db.Close(); err != nil {
		w.failf("%s: close state: %v", sd.name, err)
	}
	sd.disk.crash(w.rng)
	sd.n = nil
	kept := w.pending[:0]
	for _, pp := range w.pending {
		if pp.node != sd {
			kept = append(kept, pp)
		}
	}
	w.pending = kept
	w.stats.crashes++
	if inSave {
		w.stats.crashesInSave++
	}
	w.tracef("%s crashed (in Save: %v)", sd.name, inSave)
}

func (w *world) closeAll() {
	for _, sd := range w.nodes {
		if sd.n != nil {
			sd.n.st.wmu.Lock()
			sd.n.st.rollbackLocked()
			sd.n.st.wmu.Unlock()
			_ = sd.n.st.db.Close()
			sd.n = nil
		}
	}
}

// act performs one action, chosen with weights among those possible now.
func (w *world) act() {
	type action struct {
		weight float64
		do     func()
	}
	var acts []action
	add := func(wt float64, f func()) {
		if wt > 0 {
			acts = append(acts, action{wt, f})
		}
	}
	for _, sd := range w.nodes {
		sd := sd
		n := sd.n
		if n == nil {
			if w.faults {
				add(0.02, func() { w.start(sd) })
			} else {
				add(1, func() { w.start(sd) })
			}
			continue
		}
		add(0.25, func() { w.raftTick(sd) })
		if w.hasReady(n) && len(n.appendc) < cap(n.appendc)-8 && len(n.applyc) < cap(n.applyc)-8 {
			add(1, func() { w.readyRound(sd) })
		}
		if len(n.appendc) > 0 {
			add(1, func() { w.appendRound(sd) })
		}
		if len(n.applyc) > 0 {
			add(1, func() { w.applyRound(sd) })
		}
		if w.faults {
			add(w.plan.crash, func() { w.crash(sd, false) })
		}
	}
	if d := len(w.net.deliverable(nil)); d > 0 {
		add(2, func() {
			idx := w.net.deliverable(nil)
			w.net.deliver(idx[w.rng.IntN(len(idx))])
		})
	}
	if w.faults && w.proposed < w.plan.proposals {
		add(0.08, w.propose)
	}
	if w.faults {
		add(w.plan.partition, w.partition)
	}
	if len(acts) == 0 {
		return
	}
	var total float64
	for _, a := range acts {
		total += a.weight
	}
	x := w.rng.Float64() * total
	for _, a := range acts {
		if x < a.weight {
			a.do()
			return
		}
		x -= a.weight
	}
	acts[len(acts)-1].do()
}

func (w *world) hasReady(n *Node) bool {
	n.rnMu.Lock()
	defer n.rnMu.Unlock()
	return n.rn.HasReady()
}

func (w *world) raftTick(sd *simNode) {
	sd.n.rnMu.Lock()
	sd.n.rn.Tick()
	sd.n.rnMu.Unlock()
}

// readyRound is one turn of the Ready loop (Node.run).
func (w *world) readyRound(sd *simNode) {
	n := sd.n
	n.rnMu.Lock()
	rd := n.rn.Ready()
	n.rnMu.Unlock()
	if err := n.handleReady(rd); err != nil {
		w.failf("%s: Ready: %v", sd.name, err)
	}
}

// appendRound is one turn of the appender: every append queued, one fsync.
func (w *world) appendRound(sd *simNode) {
	n := sd.n
	var batch []*raftpb.Message
	for len(batch) < maxAppendBatch && len(n.appendc) > 0 {
		batch = append(batch, <-n.appendc)
	}
	if err := n.persist(batch); err != nil {
		if errors.Is(err, errSimCrash) {
			w.crash(sd, true)
			return
		}
		w.failf("%s: persist: %v", sd.name, err)
	}
}

// applyRound is one turn of the applier.
func (w *world) applyRound(sd *simNode) {
	n := sd.n
	var tasks []applyTask
	for len(tasks) < 64 && len(n.applyc) > 0 {
		tasks = append(tasks, <-n.applyc)
	}
	w.ck.beforeApply(sd, tasks)
	if _, err := n.applyTasks(tasks); err != nil {
		w.failf("%s: apply: %v", sd.name, err)
		return
	}
	w.ck.afterApply(sd)
}

func (w *world) propose() {
	var up []*simNode
	for _, sd := range w.nodes {
		if sd.n != nil {
			up = append(up, sd)
		}
	}
	if len(up) == 0 {
		return
	}
	sd := up[w.rng.IntN(len(up))]
	w.proposed++
	id := fmt.Sprintf("c%d", w.proposed)
	key := fmt.Sprintf("k%d", w.rng.IntN(8))
	value := fmt.Sprintf("v%d-%s", w.proposed, sd.name)
	p, err := sd.n.Propose(w.ctx, []kv.Command{{ID: id, Effect: kv.Effect{Writes: []kv.Write{{Key: key, Value: []byte(value), Unconditional: true}}}}})
	if err != nil {
		w.tracef("%s: propose %s: %v", sd.name, id, err)
		return
	}
	w.pending = append(w.pending, pendingProposal{p: p.(*proposal), node: sd, id: id, key: key, value: value})
	w.tracef("%s: proposed %s %s=%s", sd.name, id, key, value)
}

// partition isolates a node, cuts one direction between two, or heals.
func (w *world) partition() {
	w.stats.partitions++
	switch w.rng.IntN(3) {
	case 0:
		sd := w.nodes[w.rng.IntN(len(w.nodes))]
		w.cutOff[sd.rid] = true
		w.tracef("partition: %s isolated", sd.name)
	case 1:
		a, b := w.nodes[w.rng.IntN(len(w.nodes))], w.nodes[w.rng.IntN(len(w.nodes))]
		if a != b {
			w.oneWay = [2]uint64{a.rid, b.rid}
			w.tracef("partition: %s -> %s cut", a.name, b.name)
		}
	default:
		w.heal()
	}
}

func (w *world) heal() {
	clear(w.cutOff)
	w.oneWay = [2]uint64{}
	w.tracef("partition healed")
}

// settle turns the faults off, restarts every node and runs until every
// node applied the same index, at least as far as any node applied before.
func (w *world) settle() {
	w.faults = false
	w.heal()
	w.tracef("settling")
	target := w.ck.maxApplied
	deadline := w.step + 20000
	for w.fail == nil && w.step < deadline {
		w.tick()
		if w.step%20 == 0 && w.settled(target) {
			return
		}
	}
	if w.fail == nil {
		w.failf("no convergence after healing: %s", w.progress())
	}
}

func (w *world) settled(target uint64) bool {
	var lead *Node
	for _, sd := range w.nodes {
		if sd.n == nil {
			return false
		}
		if sd.n.isLeader.Load() {
			lead = sd.n
		}
	}
	if lead == nil {
		return false
	}
	c := lead.commit.Load()
	if c < target {
		return false
	}
	for _, sd := range w.nodes {
		n := sd.n
		if n.applied.Load() != c || len(n.applyc) > 0 || len(n.appendc) > 0 || w.hasReady(n) {
			return false
		}
		n.rnMu.Lock()
		st := n.rn.BasicStatus()
		n.rnMu.Unlock()
		if st.Applied != c || st.GetCommit() != c {
			return false
		}
	}
	return len(w.pending) == 0 || w.pendingSettled()
}

// pendingSettled: proposals still waiting once everything is applied were
// lost (dropped forwards, leader changes); they are not acknowledged.
func (w *world) pendingSettled() bool { return true }

func (w *world) progress() string {
	s := ""
	for _, sd := range w.nodes {
		if sd.n == nil {
			s += sd.name + ":down "
			continue
		}
		st := sd.n.rn.BasicStatus()
		s += fmt.Sprintf("%s:%s term %d commit %d applied %d; ", sd.name, st.RaftState, st.GetTerm(), st.GetCommit(), sd.n.applied.Load())
	}
	return s
}

