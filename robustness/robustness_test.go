package robustness

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The CI tier's nodes run on 127.0.47.1–3, the canaries' on 127.0.48.1–3
// and 127.0.48.11–13: the three tests run in parallel.
var (
	ciHosts      = []string{"127.0.47.1", "127.0.47.2", "127.0.47.3"}
	canaryHosts  = []string{"127.0.48.1", "127.0.48.2", "127.0.48.3"}
	canaryHosts2 = []string{"127.0.48.11", "127.0.48.12", "127.0.48.13"}
)

// jobs is the reference schema and its plugin; the suite drives any schema
// the same way (WRIT_ROBUSTNESS_SCHEMA and WRIT_ROBUSTNESS_PLUGIN_PKG pick
// another).
const (
	jobsSchema = "../examples/jobs/schema"
	jobsPlugin = "github.com/writ-dev/writ/examples/jobs/cmd/writ-jobs"
	writdPkg   = "github.com/writ-dev/writ/cmd/writd"
)

var binDir string

func TestMain(m *testing.M) {
	d, err := os.MkdirTemp("", "writ-robustness-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = d
	code := m.Run()
	os.RemoveAll(d)
	os.Exit(code)
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		t.Fatalf("%s=%q: give a non-negative integer", name, v)
	}
	return n
}

// binaries builds writd (with tags) and the schema's plugin, once per test
// binary.
func binaries(t *testing.T, tags string) Binaries {
	t.Helper()
	ctx := context.Background()
	w, err := Build(ctx, binDir, writdPkg, tags)
	if err != nil {
		t.Fatal(err)
	}
	p, err := Build(ctx, binDir, envOr("WRIT_ROBUSTNESS_PLUGIN_PKG", jobsPlugin), "")
	if err != nil {
		t.Fatal(err)
	}
	return Binaries{Writd: w, Plugins: []string{p}}
}

// faultKinds is every kind, or every kind but partitions when nftables
// cannot be had and WRIT_ROBUSTNESS_NO_PARTITIONS=1 says that is accepted.
func faultKinds(t *testing.T) []string {
	t.Helper()
	if v := os.Getenv("WRIT_ROBUSTNESS_KINDS"); v != "" {
		for _, k := range strings.Split(v, ",") {
			if !slices.Contains(FaultKinds, k) {
				t.Fatalf("WRIT_ROBUSTNESS_KINDS: unknown fault kind %q (use any of %s)", k, strings.Join(FaultKinds, ","))
			}
			if isPartition(k) {
				if err := partitionsAvailable(); err != nil {
					t.Fatalf("fault kind %s needs partitions: %v", k, err)
				}
			}
		}
		return strings.Split(v, ",")
	}
	err := partitionsAvailable()
	if err == nil {
		return FaultKinds
	}
	if os.Getenv("WRIT_ROBUSTNESS_NO_PARTITIONS") != "1" {
		t.Fatalf("network partitions cannot run: %v (fix: run as root with apt-get available, install nftables, or set WRIT_ROBUSTNESS_NO_PARTITIONS=1 to run without them)", err)
	}
	t.Logf("partitions NOT RUN: %v (WRIT_ROBUSTNESS_NO_PARTITIONS=1)", err)
	var out []string
	for _, k := range FaultKinds {
		if !isPartition(k) {
			out = append(out, k)
		}
	}
	return out
}

func runRoot(t *testing.T) string {
	t.Helper()
	if d := os.Getenv("WRIT_ROBUSTNESS_DIR"); d != "" {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
		return d
	}
	d, err := os.MkdirTemp("", "writ-robustness-")
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// ciLanes are the CI tier's clusters: runs go on in parallel, one cluster
// per lane, each on its own addresses (lane 0 on 127.0.47.1–3, the others
// on 127.0.56.x). A lane's runs follow one another; run i is lane i%lanes's.
var ciLanes = [][]string{
	ciHosts,
	{"127.0.56.1", "127.0.56.2", "127.0.56.3"},
	{"127.0.56.11", "127.0.56.12", "127.0.56.13"},
	{"127.0.56.21", "127.0.56.22", "127.0.56.23"},
}

// TestRobustness is the CI tier: WRIT_ROBUSTNESS_RUNS runs (default 30)
// of WRIT_ROBUSTNESS_FAULTS faults each (default 2) on 3 real writd
// processes, WRIT_ROBUSTNESS_LANES clusters at a time (default 3), seeds
// from WRIT_ROBUSTNESS_SEED on (default: drawn and printed). Every run must
// pass every check; the summary line is printed.
func TestRobustness(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real writd processes: skipped with -short")
	}
	t.Parallel()
	kinds := faultKinds(t)
	bins := binaries(t, "")
	runs := envInt(t, "WRIT_ROBUSTNESS_RUNS", 30)
	faults := envInt(t, "WRIT_ROBUSTNESS_FAULTS", 2)
	lanes := envInt(t, "WRIT_ROBUSTNESS_LANES", 3)
	if lanes < 1 || lanes > len(ciLanes) {
		t.Fatalf("WRIT_ROBUSTNESS_LANES=%d: give 1..%d", lanes, len(ciLanes))
	}
	base := seedBase(t, 0)
	root := runRoot(t)
	start := time.Now()
	sum := runTier(t, tier{base: base, runs: runs, lanes: ciLanes[:lanes], root: root, kinds: kinds, bins: bins,
		cfg: func(seed uint64, hosts []string) Config {
			return Config{Seed: seed, SchemaDir: envOr("WRIT_ROBUSTNESS_SCHEMA", jobsSchema), Bins: bins, Hosts: hosts, Root: root,
				Faults: faults, Kinds: kinds, ClientsPerNode: 2, Instances: 3, Keep: os.Getenv("WRIT_ROBUSTNESS_KEEP") == "1",
				Reproduce: fmt.Sprintf("WRIT_ROBUSTNESS_SEED=%d WRIT_ROBUSTNESS_RUNS=1 WRIT_ROBUSTNESS_FAULTS=%d go test -count=1 -run 'TestRobustness$' ./robustness/", seed, faults)}
		}})
	if sum.Failed == 0 && os.Getenv("WRIT_ROBUSTNESS_DIR") == "" {
		os.RemoveAll(root)
	}
	fmt.Println(sum.Line())
	t.Logf("%d runs in %s on %d lanes", runs, time.Since(start).Round(time.Second), lanes)
}

// seedBase is WRIT_ROBUSTNESS_SEED, or a seed drawn from the clock (plus
// offset) and printed by the runs.
func seedBase(t *testing.T, offset uint64) uint64 {
	t.Helper()
	base := uint64(time.Now().UnixNano()%1_000_000_000) + offset
	if s := os.Getenv("WRIT_ROBUSTNESS_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("WRIT_ROBUSTNESS_SEED=%q: give a non-negative integer", s)
		}
		base = v
	}
	return base
}

// tier is a set of runs spread over lanes.
type tier struct {
	base     uint64
	runs     int
	lanes    [][]string
	root     string
	kinds    []string
	bins     Binaries
	cfg      func(seed uint64, hosts []string) Config
	afterRun func(lane int, r *Result) // optional, called in the lane's goroutine
}

// runTier runs the tier's runs, lane l taking runs l, l+lanes, …, and folds
// them into one summary; a failing run fails t with its reproduce line.
func runTier(t *testing.T, tr tier) *Summary {
	t.Helper()
	var mu sync.Mutex
	sum := &Summary{}
	var wg sync.WaitGroup
	for l, hosts := range tr.lanes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := l; i < tr.runs; i += len(tr.lanes) {
				seed := tr.base + uint64(i)
				r := Run(context.Background(), tr.cfg(seed, hosts))
				if tr.afterRun != nil {
					tr.afterRun(l, r)
				}
				mu.Lock()
				sum.Add(r)
				mu.Unlock()
				t.Logf("seed %d (lane %d): %s, faults %s, recovery %s, %d ops, uncertain %d, keys linearizable %d/%d", seed, l, r.Duration, faultList(r), r.Recovery, opsOf(r), r.Uncertain.Total, r.Lin.Linearized, r.Lin.Checked)
				if !r.Passed() {
					t.Errorf("seed %d failed: %s\n  reproduce: %s\n  kept: %s", seed, strings.Join(r.Failures(), "; "), r.Reproduce, r.Dir)
				}
			}
		}()
	}
	wg.Wait()
	return sum
}

func faultList(r *Result) string {
	var ks []string
	for _, f := range r.Faults {
		ks = append(ks, f.Kind)
	}
	return strings.Join(ks, ",")
}

func opsOf(r *Result) int {
	n := 0
	for _, v := range r.Ops {
		n += v
	}
	return n
}

// TestRobustnessCatchesReplyBeforeCommit: a writd built with the
// canary_replybeforecommit tag answers requests COMMITTED when they are
// proposed; the suite must fail on it (the acknowledged-not-lost check).
func TestRobustnessCatchesReplyBeforeCommit(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real writd processes: skipped with -short")
	}
	t.Parallel()
	bins := binaries(t, "canary_replybeforecommit")
	root := runRoot(t)
	defer os.RemoveAll(root)
	r := Run(context.Background(), Config{
		Seed: 1, SchemaDir: jobsSchema, Bins: bins, Hosts: canaryHosts, Root: root,
		Faults: 1, Kinds: []string{KillLeader}, ClientsPerNode: 1, Instances: 2,
	})
	if r.Error != "" {
		t.Fatalf("the canary run did not complete: %s", r.Error)
	}
	for _, c := range r.Checks {
		if c.Name == "acknowledged-not-lost" && !c.Pass {
			t.Logf("caught: %s: %v", c.Name, c.Detail[0])
			return
		}
	}
	t.Fatalf("a writd that replies before commit passed: %v", r.Checks)
}

// TestRobustnessCatchesFactLostOnRestart: a writd built with the
// canary_factlostonrestart tag forgets its outbox when it starts; the
// kill-isolated-follower fault (facts wait in the isolated node's outbox,
// the node is killed and restarted; three times, with three clients per
// node) must make facts-exactly-once fail.
func TestRobustnessCatchesFactLostOnRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real writd processes: skipped with -short")
	}
	t.Parallel()
	kinds := faultKinds(t)
	if len(kinds) < len(FaultKinds) {
		t.Skip("needs partitions (NOT RUN without nftables)")
	}
	bins := binaries(t, "canary_factlostonrestart")
	root := runRoot(t)
	defer os.RemoveAll(root)
	r := Run(context.Background(), Config{
		Seed: 2, SchemaDir: jobsSchema, Bins: bins, Hosts: canaryHosts2, Root: root,
		Faults: 3, Kinds: []string{KillIsolated}, ClientsPerNode: 3, Instances: 2, HealTimeout: 5 * time.Second,
	})
	t.Logf("canary run: %s %v", r.Duration, r.Phases)
	if r.Error != "" {
		t.Fatalf("the canary run did not complete: %s", r.Error)
	}
	for _, c := range r.Checks {
		if c.Name == "facts-exactly-once" && !c.Pass {
			t.Logf("caught: %s: %d facts, first: %v", c.Name, c.Failures, c.Detail[0])
			return
		}
	}
	t.Fatalf("a writd that forgets its outbox on restart passed: %v", r.Checks)
}
