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

	"github.com/writ-dev/writ/internal/testsummary"
)

// The CI tier's nodes run on 127.0.47.1–3, the canaries' on 127.0.48.1–3
// and 127.0.48.11–13: the three tests run in parallel.
var (
	canaryHosts  = []string{"127.0.48.1", "127.0.48.2", "127.0.48.3"}
	canaryHosts2 = []string{"127.0.48.11", "127.0.48.12", "127.0.48.13"}
)

// jobs is the reference schema and its plugin; the suite drives any schema
// the same way (WRITTEST_ROBUSTNESS_SCHEMA and WRITTEST_ROBUSTNESS_PLUGIN_PKG pick
// another).
const (
	jobsSchema   = "../examples/jobs/schema"
	jobsPlugin   = "github.com/writ-dev/writ/examples/jobs/cmd/writ-jobs"
	leasesSchema = "../examples/leases/schema"
	leasesPlugin = "github.com/writ-dev/writ/examples/leases/cmd/writ-leases"
	writdPkg     = "github.com/writ-dev/writ/cmd/writd"
)

// underTest is a schema and the package of the plugin that serves it.
type underTest struct{ schema, plugin string }

// schemaFor is the schema run i of a tier drives: the one
// WRITTEST_ROBUSTNESS_SCHEMA names, else the reference domain, and every
// fifth run the second example domain (leases), so that every tier shows
// the suite drives a schema from its catalog, not the jobs domain by hand.
func schemaFor(i int) underTest {
	if s := os.Getenv("WRITTEST_ROBUSTNESS_SCHEMA"); s != "" {
		return underTest{s, envOr("WRITTEST_ROBUSTNESS_PLUGIN_PKG", jobsPlugin)}
	}
	if i%5 == 4 {
		return underTest{leasesSchema, leasesPlugin}
	}
	return underTest{jobsSchema, jobsPlugin}
}

// reproduceEnv is what a reproduce line sets to run u again.
func (u underTest) reproduceEnv() string {
	if u.schema == jobsSchema {
		return ""
	}
	return fmt.Sprintf("WRITTEST_ROBUSTNESS_SCHEMA=%s WRITTEST_ROBUSTNESS_PLUGIN_PKG=%s ", u.schema, u.plugin)
}

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
	return binariesFor(t, tags, envOr("WRITTEST_ROBUSTNESS_PLUGIN_PKG", jobsPlugin))
}

// binariesFor builds writd (with tags) and the plugin package plugin.
func binariesFor(t *testing.T, tags, plugin string) Binaries {
	t.Helper()
	ctx := context.Background()
	w, err := Build(ctx, binDir, writdPkg, tags)
	if err != nil {
		t.Fatal(err)
	}
	p, err := Build(ctx, binDir, plugin, "")
	if err != nil {
		t.Fatal(err)
	}
	return Binaries{Writd: w, Plugins: []string{p}}
}

// faultKinds is every kind of the default mix (or those
// WRITTEST_ROBUSTNESS_KINDS names), less partitions when nftables cannot be
// had and WRITTEST_ROBUSTNESS_NO_PARTITIONS=1 says that is accepted, and less
// disk faults when strace is absent and the suite is not root (it cannot
// install it).
func faultKinds(t *testing.T) []string {
	t.Helper()
	kinds := FaultKinds
	named := os.Getenv("WRITTEST_ROBUSTNESS_KINDS") != ""
	if named {
		kinds = strings.Split(os.Getenv("WRITTEST_ROBUSTNESS_KINDS"), ",")
		for _, k := range kinds {
			if !slices.Contains(FaultKinds, k) && !slices.Contains(ExtraKinds, k) {
				t.Fatalf("WRITTEST_ROBUSTNESS_KINDS: unknown fault kind %q (use any of %s)", k, strings.Join(append(slices.Clone(FaultKinds), ExtraKinds...), ","))
			}
		}
	}
	parts := !slices.ContainsFunc(kinds, isPartition) || havePartitions(t, named)
	disks := !slices.ContainsFunc(kinds, isFsync) || haveStrace(t, named)
	full := !slices.Contains(kinds, DiskFull) || haveTmpfs(t, named)
	var out []string
	for _, k := range kinds {
		if (parts || !isPartition(k)) && (disks || !isFsync(k)) && (full || k != DiskFull) {
			out = append(out, k)
		}
	}
	return out
}

// havePartitions reports whether nftables partitions can run; it fails t
// when they cannot and nothing allows that.
func havePartitions(t *testing.T, named bool) bool {
	t.Helper()
	err := partitionsAvailable()
	switch {
	case err == nil:
		return true
	case named:
		t.Fatalf("the named fault kinds need partitions: %v", err)
	case os.Getenv("WRITTEST_ROBUSTNESS_NO_PARTITIONS") != "1":
		t.Fatalf("network partitions cannot run: %v (fix: run as root with apt-get available, install nftables, or set WRITTEST_ROBUSTNESS_NO_PARTITIONS=1 to run without them)", err)
	}
	t.Logf("partitions NOT RUN: %v (WRITTEST_ROBUSTNESS_NO_PARTITIONS=1)", err)
	return false
}

// haveTmpfs reports whether disk-full can run (root mounts its tmpfs);
// it fails t when a named kind needs it.
func haveTmpfs(t *testing.T, named bool) bool {
	t.Helper()
	err := diskFullAvailable()
	switch {
	case err == nil:
		return true
	case named:
		t.Fatalf("disk-full cannot run: %v", err)
	}
	t.Logf("disk-full NOT RUN: %v", err)
	return false
}

// haveStrace reports whether strace can run (installing it as root); it
// fails t when it cannot as root, or when a named kind needs it.
func haveStrace(t *testing.T, named bool) bool {
	t.Helper()
	err := straceAvailable()
	switch {
	case err == nil:
		return true
	case named || os.Geteuid() == 0:
		t.Fatalf("disk faults (strace) cannot run: %v", err)
	}
	t.Logf("disk faults NOT RUN: %v (install strace, or run as root so the suite installs it)", err)
	return false
}

func runRoot(t *testing.T) string {
	t.Helper()
	if d := os.Getenv("WRITTEST_ROBUSTNESS_DIR"); d != "" {
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

// TestRobustness is the CI tier: WRITTEST_ROBUSTNESS_RUNS runs (default 30)
// of WRITTEST_ROBUSTNESS_FAULTS faults each (default 2) on 3 real writd
// processes, seeds from WRITTEST_ROBUSTNESS_SEED on (default: drawn and
// printed). Every run must pass every check; the summary line is printed.
func TestRobustness(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real writd processes: skipped with -short")
	}
	t.Parallel()
	runs := envInt(t, "WRITTEST_ROBUSTNESS_RUNS", 30)
	faults := envInt(t, "WRITTEST_ROBUSTNESS_FAULTS", 2)
	lanes := envInt(t, "WRITTEST_ROBUSTNESS_LANES", 3)
	base := uint64(time.Now().UnixNano() % 1_000_000_000)
	if s := os.Getenv("WRITTEST_ROBUSTNESS_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("WRITTEST_ROBUSTNESS_SEED=%q: give a non-negative integer", s)
		}
		base = v
	}
	runTier(t, tier{base: base, runs: runs, faults: faults, lanes: lanes, clientsPerNode: 2, instances: 3})
}

// tier is one tier of the suite: runs seeds from base, faults faults each,
// lanes clusters at a time (each on its own addresses).
type tier struct {
	base                                           uint64
	runs, faults, lanes, clientsPerNode, instances int
}

// laneHosts are the addresses of lane i: 127.0.N.(10i+1..3), N 47 unless
// WRITTEST_ROBUSTNESS_NET names another (so that a second copy of the
// tier can run beside the first).
func laneHosts(t *testing.T, i int) []string {
	net := envInt(t, "WRITTEST_ROBUSTNESS_NET", 47)
	if net < 1 || net > 254 {
		t.Fatalf("WRITTEST_ROBUSTNESS_NET=%d: give 1..254", net)
	}
	var out []string
	for n := 1; n <= 3; n++ {
		out = append(out, fmt.Sprintf("127.0.%d.%d", net, 10*i+n))
	}
	return out
}

// runTier runs a tier's seeds, lane by lane in parallel (seed base+i in
// lane i mod lanes), fails t for each seed that fails (with the command
// that reproduces it), and prints the summary line.
func runTier(t *testing.T, tr tier) {
	kinds := faultKinds(t)
	bins := map[underTest]Binaries{}
	for i := range min(tr.runs, 5) {
		if u := schemaFor(i); bins[u].Writd == "" {
			bins[u] = binariesFor(t, "", u.plugin)
		}
	}
	root := runRoot(t)
	lanes := max(1, min(tr.lanes, 20))
	var mu sync.Mutex
	var sum Summary
	var wg sync.WaitGroup
	hosts := make([][]string, lanes)
	for lane := range lanes {
		hosts[lane] = laneHosts(t, lane)
	}
	for lane := range lanes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := lane; i < tr.runs; i += lanes {
				seed := tr.base + uint64(i)
				u := schemaFor(i)
				r := Run(context.Background(), Config{
					Seed: seed, SchemaDir: u.schema, Bins: bins[u], Hosts: hosts[lane], Root: root,
					Faults: tr.faults, Kinds: kinds, ClientsPerNode: tr.clientsPerNode, Instances: tr.instances,
					Reproduce: fmt.Sprintf("%sWRITTEST_ROBUSTNESS_SEED=%d WRITTEST_ROBUSTNESS_RUNS=1 WRITTEST_ROBUSTNESS_FAULTS=%d go test -count=1 -run 'TestRobustness$' ./robustness/", u.reproduceEnv(), seed, tr.faults),
				})
				mu.Lock()
				sum.Add(r)
				mu.Unlock()
				t.Logf("seed %d (lane %d): %s, %d faults, recovery %s, %d ops, uncertain %d, keys linearizable %d/%d", seed, lane, r.Duration, len(r.Faults), r.Recovery, opsOf(r), r.Uncertain.Total, r.Lin.Linearized, r.Lin.Checked)
				if !r.Passed() {
					t.Errorf("seed %d failed: %s\n  reproduce: %s\n  kept: %s", seed, strings.Join(r.Failures(), "; "), r.Reproduce, r.Dir)
				}
			}
		}()
	}
	wg.Wait()
	if sum.Failed == 0 && os.Getenv("WRITTEST_ROBUSTNESS_DIR") == "" {
		os.RemoveAll(root)
	}
	for _, g := range sum.Growth {
		t.Logf("growth flagged: %s", g)
	}
	printSummary(t, t.Name(), sum.Line())
}

// printSummary prints a tier's summary line (shown with -v) and records it
// for a run without -v (testsummary).
func printSummary(t *testing.T, name, line string) {
	t.Helper()
	fmt.Println(line)
	testsummary.Record(t, name, line)
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
	if !havePartitions(t, false) {
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
