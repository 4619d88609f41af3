package robustness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/writ-dev/writ/conformance"
)

// Config is one run.
type Config struct {
	Seed uint64
	// SchemaDir is the schema the nodes run (--schema); Bins.Plugins serve it.
	SchemaDir string
	Bins      Binaries
	// Hosts are the nodes' loopback addresses (3); the run owns them.
	Hosts []string
	// Root is where the run's directory is made (run-<seed>); it is removed
	// when every check passes, except run.json.
	Root string
	// Faults is how many faults the nemesis injects; with FaultsFor set it
	// goes on injecting drawn faults, one after the other, until that long
	// has passed since the first (a soak segment).
	Faults    int
	FaultsFor time.Duration
	// Kinds are the fault kinds drawn from (default FaultKinds).
	Kinds []string
	// ClientsPerNode is how many concurrent clients address each node.
	ClientsPerNode int
	// Instances is how many machine instances of each machine the workload
	// addresses.
	Instances int
	// Reproduce is the command line that reruns this seed.
	Reproduce string
	// HealTimeout bounds the wait for readiness and convergence after heal
	// (default 60 s).
	HealTimeout time.Duration
}

// Result is what run.json holds.
type Result struct {
	Seed      uint64         `json:"seed"`
	Schema    string         `json:"schema"`
	Timing    Timing         `json:"timing"`
	Hosts     []string       `json:"hosts"`
	Faults    []Fault        `json:"faults"`
	Ops       map[string]int `json:"ops_by_outcome"`
	Uncertain Uncertain      `json:"uncertain"`
	Checks    []CheckResult  `json:"checks"`
	Lin       linResult      `json:"linearizability"`
	Watch     watchStats     `json:"watch"`
	Receipts  receiptStats   `json:"receipt_items"`
	Recovery  string         `json:"recovery_after_heal"`
	StateHash string         `json:"state_hash,omitempty"` // every node's, after heal
	// JoinExits are restarts that ended in writd's documented seed-join
	// failure (exit 2) because the seed was down or partitioned away too;
	// the heal restarted the node. Reported, not a failure.
	JoinExits []string `json:"join_exits,omitempty"`
	// Resources is every node's RSS and goroutine count (sampled every
	// 2 s, and when quiet at start and after heal).
	Resources []NodeUsage       `json:"resources,omitempty"`
	Duration  string            `json:"duration"`
	Phases    map[string]string `json:"phases"`
	Error     string            `json:"error,omitempty"`
	Reproduce string            `json:"reproduce"`
	Dir       string            `json:"dir,omitempty"`
}

// Passed reports whether the run completed and every check passed.
func (r *Result) Passed() bool {
	if r.Error != "" {
		return false
	}
	for _, c := range r.Checks {
		if !c.Pass {
			return false
		}
	}
	return true
}

// Failures lists the failing checks with their first detail.
func (r *Result) Failures() []string {
	var out []string
	if r.Error != "" {
		out = append(out, "run: "+r.Error)
	}
	for _, c := range r.Checks {
		if !c.Pass {
			d := ""
			if len(c.Detail) > 0 {
				d = ": " + c.Detail[0]
			}
			out = append(out, c.Name+d)
		}
	}
	return out
}

// drawTiming draws the cluster's timing from the seed: tick 20–50 ms,
// 10–20 election ticks, a snapshot every 10–1000 entries, commit timeout
// 0.5–3 s.
func drawTiming(rng *rand.Rand) Timing {
	return Timing{
		Tick:            []time.Duration{20 * time.Millisecond, 30 * time.Millisecond, 50 * time.Millisecond}[rng.IntN(3)],
		ElectionTicks:   10 + rng.IntN(11),
		SnapshotEntries: []int{10, 25, 100, 1000}[rng.IntN(4)],
		CommitTimeout:   []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 3 * time.Second}[rng.IntN(4)],
	}
}

// runner is one run in progress: its configuration and result, the
// cluster, the firewall, the history and the workload.
type runner struct {
	cfg   Config
	res   *Result
	dir   string
	rng   *rand.Rand
	gen   *conformance.Generator
	cl    *Cluster
	fw    *firewall
	h     *History
	w     *workload
	wl    *watchLog
	smp   *sampler
	phase time.Time
}

// mark records how long the phase that ends now took.
func (r *runner) mark(name string) {
	r.res.Phases[name] = time.Since(r.phase).Round(time.Millisecond).String()
	r.phase = time.Now()
}

// Run runs one seed: cluster, workload, nemesis, heal, checks, report.
func Run(ctx context.Context, cfg Config) *Result {
	start := time.Now()
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x5eed))
	res := &Result{Seed: cfg.Seed, Schema: cfg.SchemaDir, Timing: drawTiming(rng), Hosts: cfg.Hosts, Ops: map[string]int{}, Reproduce: cfg.Reproduce, Phases: map[string]string{}}
	r := &runner{cfg: cfg, res: res, rng: rng, phase: time.Now(), dir: filepath.Join(cfg.Root, fmt.Sprintf("run-%d", cfg.Seed))}
	_ = os.RemoveAll(r.dir)
	if err := os.MkdirAll(r.dir, 0o700); err != nil {
		res.Error = err.Error()
		return res
	}
	defer r.report(start)
	var err error
	if r.gen, err = conformance.NewGenerator(cfg.SchemaDir, cfg.Seed); err != nil {
		res.Error = err.Error()
		return res
	}
	defer r.gen.Close()
	// Each run starts its own copy of the plugin binaries, so that the
	// orphan check (g) finds this run's plugin processes by their
	// executable and never another run's (runs in one test binary, and
	// tests, share the built binaries and run in parallel).
	if r.cfg.Bins, err = runPlugins(cfg.Bins, filepath.Join(r.dir, "bin")); err != nil {
		res.Error = err.Error()
		return res
	}
	r.cl, err = StartCluster(ctx, r.cfg.Bins, r.gen.Dir(), r.dir, cfg.Hosts, res.Timing)
	closed := false
	var exits []string
	closeCluster := func() {
		if !closed {
			closed = true
			exits = r.cl.Close()
		}
	}
	defer closeCluster()
	if err != nil {
		res.Error = "cluster did not start: " + err.Error()
		return res
	}
	r.smp = newSampler(r.cl)
	r.smp.mark(ctx, false, r.dir)
	defer func() { res.Resources = r.smp.result() }()
	r.mark("start")
	r.fw = newFirewall()
	defer func() { _ = r.fw.heal() }()
	defer func() {
		if r.wl != nil {
			r.wl.close()
			res.Watch = r.wl.stats()
		}
	}()
	if err := r.drive(ctx); err != nil {
		res.Error = err.Error()
		return res
	}
	hcheck, convergedAt, err := r.heal(ctx)
	if err != nil {
		res.Error = err.Error()
		return res
	}
	ops := r.h.Ops()
	checks := r.check(ctx, ops, convergedAt)
	r.mark("checks")
	closeCluster()
	r.mark("close")
	res.JoinExits = r.cl.JoinExits()
	g := checkLogs(r.cl, exits)
	orph := checkOrphans(r.cfg.Bins.Plugins, 10*time.Second)
	r.mark("orphans")
	res.Checks = append(append([]CheckResult{checkFaults(res.Faults), hcheck}, checks...), g, orph)
	if !res.Passed() {
		writeHistory(filepath.Join(r.dir, "history.jsonl"), ops)
	}
	return res
}

// report writes run.json; of a passing run's directory only it is kept,
// with the goroutine profiles of nodes whose growth was flagged.
func (r *runner) report(start time.Time) {
	res := r.res
	res.Duration = time.Since(start).Round(time.Millisecond).String()
	if !res.Passed() {
		res.Dir = r.dir
	}
	b, _ := json.MarshalIndent(res, "", "  ")
	if res.Passed() {
		ents, _ := os.ReadDir(r.dir)
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), "goroutines-") {
				continue
			}
			_ = os.RemoveAll(filepath.Join(r.dir, e.Name()))
		}
	}
	_ = os.WriteFile(filepath.Join(r.dir, "run.json"), b, 0o600)
}

// drive creates the instances, runs the clients (ClientsPerNode per node
// and one config client) and injects the faults one after the other; it
// returns once the clients have stopped.
func (r *runner) drive(ctx context.Context) error {
	cfg := r.cfg
	kinds := cfg.Kinds
	if len(kinds) == 0 {
		kinds = FaultKinds
	}
	r.h = newHistory()
	w := &workload{cl: r.cl, h: r.h, timeout: r.res.Timing.CommitTimeout, gen: r.gen, run: fmt.Sprintf("s%d", cfg.Seed)}
	r.w = w
	for i := 0; i < max(1, cfg.Instances); i++ {
		w.insts = append(w.insts, fmt.Sprintf("rk-%d", i))
	}
	var err error
	if r.wl, err = startWatch(ctx, r.cl); err != nil {
		return err
	}
	w.setup(ctx)
	if len(w.targets) == 0 {
		return errors.New("the schema has no request type that creates a machine instance: nothing to drive")
	}
	wctx, stopClients := context.WithCancel(ctx)
	var wg sync.WaitGroup
	cid := 1
	for _, n := range r.cl.nodes {
		for k := 0; k < max(1, cfg.ClientsPerNode); k++ {
			wg.Add(1)
			crng := rand.New(rand.NewPCG(cfg.Seed, uint64(cid)))
			go func(id int, n *Node) { defer wg.Done(); w.client(wctx, id, n, crng) }(cid, n)
			cid++
		}
	}
	wg.Add(1)
	go func() { defer wg.Done(); r.smp.run(wctx, 2*time.Second) }()
	wg.Add(1)
	go func(id int) { defer wg.Done(); w.configClient(wctx, id, rand.New(rand.NewPCG(cfg.Seed, uint64(id)))) }(cid)
	loadRng := rand.New(rand.NewPCG(cfg.Seed, uint64(cid+1)))
	var loadMu sync.Mutex
	load := func(ctx context.Context, n *Node) {
		loadMu.Lock() // one flood at a time: the rng is not shared
		defer loadMu.Unlock()
		w.flood(ctx, cid+1, n, loadRng)
	}
	ne := &nemesis{cl: r.cl, fw: r.fw, h: r.h, rng: r.rng, kinds: kinds, dir: r.dir, load: load}
	sleepCtx(ctx, 500*time.Millisecond) // traffic before the first fault
	kinds = ne.schedule(cfg.Seed, cfg.Faults)
	until := time.Now().Add(cfg.FaultsFor)
	for i := 0; ctx.Err() == nil && (i < len(kinds) || time.Now().Before(until)); i++ {
		kind := ne.kinds[r.rng.IntN(len(ne.kinds))]
		if i < len(kinds) {
			kind = kinds[i]
		}
		// A node that is down now (not by a fault in progress) would make
		// the next fault miss its victim; one still down after 30 s is
		// left to the fault, which then fails faults-injected.
		_ = r.cl.WaitUp(ctx, 30*time.Second)
		r.res.Faults = append(r.res.Faults, ne.inject(ctx, kind))
		sleepCtx(ctx, time.Duration(200+r.rng.IntN(800))*time.Millisecond)
	}
	stopClients()
	wg.Wait()
	r.mark("faults")
	return nil
}

// heal heals everything, then waits for the cluster to recover and
// converge: check converged, and the moment it did on the history's base.
func (r *runner) heal(ctx context.Context) (CheckResult, int64, error) {
	healStart := time.Now()
	hcheck := CheckResult{Name: "converged", Pass: true, Cases: 1}
	if err := r.fw.heal(); err != nil {
		return hcheck, 0, err
	}
	if err := r.cl.Heal(); err != nil {
		return hcheck, 0, fmt.Errorf("heal: %w", err)
	}
	healTimeout := r.cfg.HealTimeout
	if healTimeout <= 0 {
		healTimeout = 60 * time.Second
	}
	if err := r.cl.WaitHealthy(ctx, healTimeout); err != nil {
		hcheck.fail("after heal: %v", err)
	}
	hash, err := r.cl.Converge(ctx, healTimeout)
	if err != nil {
		hcheck.fail("state hashes: %v", err)
		// What each node was doing when it did not converge (a stuck
		// fact, a blocked loop): every goroutine with its wait time.
		for _, n := range r.cl.Nodes() {
			if n.Up() && r.dir != "" {
				saveGoroutines(ctx, n.metrics, 2, filepath.Join(r.dir, "stuck-goroutines-"+n.Name+".txt"))
			}
		}
	}
	r.res.Recovery = time.Since(healStart).Round(time.Millisecond).String()
	r.res.StateHash = hash
	r.smp.mark(ctx, true, r.dir)
	r.mark("heal")
	return hcheck, r.h.now(), nil
}

// check asks every node for the outcome of every ID, settles what no
// answer decided, reads the final state and runs the history checks.
func (r *runner) check(ctx context.Context, ops []Op, convergedAt int64) []CheckResult {
	res, cl := r.res, r.cl
	for _, op := range ops {
		res.Ops[op.Kind+" "+op.Outcome]++
	}
	ids, order := byID(ops)
	outs := outcomes(ctx, cl, order)
	cfgFinal := readConfigFinal(ctx, cl)
	cfgOuts := outcomes(ctx, cl, configIDs(ops, cfgFinal))
	r.mark("outcomes")
	// Settle what no answer decided, then ask every node again.
	open := undecided(ids, order)
	settleErr := settleAll(ctx, cl, open, res.Timing.CommitTimeout)
	for id, o := range outcomes(ctx, cl, open) {
		outs[id] = o
	}
	r.mark("settle")
	items, badAcks := receiptItems(ops)
	itemOuts := settleItems(ctx, cl, itemIDs(items), max(2*time.Second, res.Timing.CommitTimeout), 60*time.Second)
	rc, itemCmds, rst := checkReceipts(items, badAcks, itemOuts, r.h.now())
	res.Receipts = rst
	r.mark("receipts")
	committed := map[string]uint64{}
	var newest uint64
	for _, id := range order {
		if ci, ok := committedIndex(outs[id]); ok {
			committed[id], newest = ci, max(newest, ci)
		}
	}
	for _, c := range itemCmds {
		committed[c.id], newest = c.index, max(newest, c.index)
	}
	r.wl.stop(ctx, newest, 30*time.Second)
	wc := checkWatch(r.wl, committed, redelivered(items))
	a, b, c, cmds := checkAcknowledged(ids, order, outs, convergedAt)
	cmds = append(cmds, itemCmds...)
	sc, unc := checkSettled(ids, open, outs, settleErr)
	res.Uncertain = unc
	finals := finalRecords(ctx, cl, r.w.targets)
	lin := checkLinearizable(ops, revisionsOf(finals), r.h.now(), cmds, r.dir, 20*time.Second)
	res.Lin = lin
	lc := CheckResult{Name: "linearizable", Pass: lin.ok(), Cases: lin.Checked}
	for _, k := range lin.Illegal {
		lc.fail("%s: not linearizable (visualisation in the run directory)", k)
	}
	for _, k := range lin.Unknown {
		lc.fail("%s: porcupine could not decide within its timeout", k)
	}
	for _, k := range lin.Uncheckable {
		lc.fail("%s", k)
	}
	gc := checkGuards(r.gen.Catalog(), r.w.targets, ops, finals, cmds)
	return []CheckResult{a, b, c, sc, lc, gc, checkConfig(ops, cfgOuts, cfgFinal), checkFsync(res.Faults, ops), checkDiskFull(res.Faults), checkReuse(ops), wc, rc}
}

func writeHistory(path string, ops []Op) {
	f, err := os.Create(path)
	if err != nil {
		return
	}
	defer f.Close()
	enc := json.NewEncoder(f)
	for _, op := range ops {
		_ = enc.Encode(op)
	}
}

// Summary is the one line a tier prints over its runs.
type Summary struct {
	Runs, Failed         int
	Schemas              map[string]int // runs by schema directory
	Faults               map[string]int
	Ops                  int
	AckLost, FactsLost   int
	Refused              int
	KeysChecked, KeysLin int
	Uncertain            Uncertain
	Recovery             []time.Duration
	JoinExits            int
	// Configs counts the config changes by their answer (COMMITTED,
	// FAILED, anything else).
	Configs, ConfigsConfirmed, ConfigsFailed int
	// MaxRSS and MaxGoroutines are the most any node reached; Growth
	// lists the nodes whose process grew past the flag's bound.
	MaxRSS        int64
	MaxGoroutines int
	Growth        []string
	// Reuses counts the committed IDs submitted with another payload,
	// Refused those answered REJECTED; WatchEvents and WatchResumes sum
	// the runs' watchers.
	Reuses, ReusesRefused     int
	WatchEvents, WatchResumes int
	// Deliveries counts the receipts delivered (RECEIVED), Items their
	// items by how they ended.
	Deliveries int
	Items      receiptStats
}

// Add folds one run into the summary.
func (s *Summary) Add(r *Result) {
	if s.Faults == nil {
		s.Faults = map[string]int{}
		s.Schemas = map[string]int{}
	}
	s.Runs++
	s.Schemas[filepath.Base(filepath.Dir(filepath.Clean(r.Schema)))]++
	if !r.Passed() {
		s.Failed++
	}
	for _, f := range r.Faults {
		s.Faults[f.Kind]++
	}
	for k, n := range r.Ops {
		s.Ops += n
		if strings.HasPrefix(k, "config ") {
			s.Configs += n
			switch k {
			case "config COMMITTED":
				s.ConfigsConfirmed += n
			case "config " + outFailed:
				s.ConfigsFailed += n
			}
		}
		if k == "deliver "+outReceived {
			s.Deliveries += n
		}
		if strings.HasPrefix(k, "reuse ") {
			s.Reuses += n
			if k == "reuse REJECTED" {
				s.ReusesRefused += n
			}
		}
	}
	for _, c := range r.Checks {
		switch c.Name {
		case "acknowledged-not-lost":
			if !c.Pass {
				s.AckLost += c.Failures
			}
		case "facts-exactly-once":
			if !c.Pass {
				s.FactsLost += c.Failures
			}
		}
	}
	if d, err := time.ParseDuration(r.Recovery); err == nil {
		s.Recovery = append(s.Recovery, d)
	}
	s.JoinExits += len(r.JoinExits)
	for _, u := range r.Resources {
		s.MaxRSS = max(s.MaxRSS, u.MaxRSS)
		s.MaxGoroutines = max(s.MaxGoroutines, u.MaxGoroutines)
		if u.Growth != "" {
			s.Growth = append(s.Growth, fmt.Sprintf("seed %d %s: %s", r.Seed, u.Node, u.Growth))
		}
	}
	s.KeysChecked += r.Lin.Checked
	s.KeysLin += r.Lin.Linearized
	s.Uncertain.add(r.Uncertain)
	s.Items.Items += r.Receipts.Items
	s.Items.Committed += r.Receipts.Committed
	s.Items.Rejected += r.Receipts.Rejected
	s.Items.Unknown += r.Receipts.Unknown
	s.WatchEvents += r.Watch.Events
	s.WatchResumes += r.Watch.Resumes + r.Watch.Reopens
}

// Line is the summary line.
func (s *Summary) Line() string {
	kinds := make([]string, 0, len(s.Faults))
	total := 0
	for k, n := range s.Faults {
		kinds = append(kinds, fmt.Sprintf("%s=%d", k, n))
		total += n
	}
	sort.Strings(kinds)
	schemas := make([]string, 0, len(s.Schemas))
	for k, n := range s.Schemas {
		schemas = append(schemas, fmt.Sprintf("%s=%d", k, n))
	}
	sort.Strings(schemas)
	return fmt.Sprintf("robustness: runs=%d (%s) failed=%d faults=%d (%s) ops=%d acknowledged-lost=%d facts-lost=%d keys-linearizable=%d/%d uncertain=%d (committed=%d not-committed=%d rejected=%d) told-not-committed=%d (confirmed=%d) unresolved=%d disagreeing=%d configs=%d (confirmed=%d failed=%d) id-reuses=%d (refused=%d) receipts=%d (items=%d committed=%d rejected=%d unlogged=%d) watch-events=%d (resumes=%d) seed-join-exits=%d rss-max=%dMiB goroutines-max=%d growth-flags=%d recovery %s",
		s.Runs, strings.Join(schemas, " "), s.Failed, total, strings.Join(kinds, " "), s.Ops, s.AckLost, s.FactsLost, s.KeysLin, s.KeysChecked,
		s.Uncertain.Total, s.Uncertain.Committed, s.Uncertain.NotCommitted, s.Uncertain.Rejected, s.Uncertain.Told, s.Uncertain.ToldConfirmed,
		s.Uncertain.Unresolved, s.Uncertain.Disagreeing, s.Configs, s.ConfigsConfirmed, s.ConfigsFailed, s.Reuses, s.ReusesRefused, s.Deliveries, s.Items.Items, s.Items.Committed, s.Items.Rejected, s.Items.Unknown, s.WatchEvents, s.WatchResumes, s.JoinExits, s.MaxRSS>>20, s.MaxGoroutines, len(s.Growth), percentiles(s.Recovery))
}

// percentiles describes durations as p50/p99/max.
func percentiles(ds []time.Duration) string {
	if len(ds) == 0 {
		return "p50=- p99=- max=-"
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	at := func(q float64) time.Duration { return s[min(len(s)-1, int(q*float64(len(s))))] }
	return fmt.Sprintf("p50=%s p99=%s max=%s", at(0.5), at(0.99), s[len(s)-1])
}

// runPlugins copies b's plugin binaries into dir and returns b with the
// copies.
func runPlugins(b Binaries, dir string) (Binaries, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return b, fmt.Errorf("robustness: %w", err)
	}
	out := b
	out.Plugins = nil
	for _, p := range b.Plugins {
		src, err := os.ReadFile(p)
		if err != nil {
			return b, fmt.Errorf("robustness: plugin binary: %w", err)
		}
		dst := filepath.Join(dir, filepath.Base(p))
		if err := os.WriteFile(dst, src, 0o700); err != nil {
			return b, fmt.Errorf("robustness: plugin binary: %w", err)
		}
		out.Plugins = append(out.Plugins, dst)
	}
	return out, nil
}
