package robustness

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

// The canaries of docs/robustness.md beyond the first two (in
// robustness_test.go): each builds writd with a tag that compiles a
// deliberate bug in, runs a short seed on its own addresses
// (127.0.70.x) and fails unless the named check fails.

// cyclic is the cyclic test domain: one machine whose states go back and
// forth, with order epochs and a terminal state, and a handler that
// records every probe the guard lets through (the jobs handlers refuse a
// move out of a terminal state themselves, which hides a guard that lets
// it through).
const (
	cyclicSchema = "../internal/cyclic/schema"
	cyclicPlugin = "github.com/writ-dev/writ/internal/cyclic/cmd/writ-cyclic"
)

// canaryRun runs cfg with a writd built with tags and returns the first
// failing check named check (alternatives separated by "|"), failing the
// test when a run did not complete or the check passed in every run. cfg.SchemaDir "" is the jobs
// schema.
func canaryRun(t *testing.T, tags, check, bug string, cfg Config) CheckResult {
	t.Helper()
	cfg.Bins = binaries(t, tags)
	if cfg.SchemaDir == cyclicSchema {
		p, err := Build(context.Background(), binDir, cyclicPlugin, "")
		if err != nil {
			t.Fatal(err)
		}
		cfg.Bins.Plugins = []string{p}
	}
	cfg.Root = runRoot(t)
	if os.Getenv("WRITTEST_ROBUSTNESS_DIR") == "" {
		defer os.RemoveAll(cfg.Root)
	}
	if cfg.SchemaDir == "" {
		cfg.SchemaDir = jobsSchema
	}
	// A run is a draw of traffic and timing: a bug a seed's traffic never
	// reaches is not caught by that seed. Up to canarySeeds seeds run,
	// one after another, until one catches it; the canary fails the test
	// only when none does.
	var last []CheckResult
	for i := range canarySeeds {
		c := cfg
		c.Seed = cfg.Seed + uint64(i)*1000
		r := Run(context.Background(), c)
		t.Logf("canary run, seed %d: %s %v; failures: %s", c.Seed, r.Duration, r.Phases, strings.Join(r.Failures(), "; "))
		if r.Error != "" {
			t.Fatalf("the canary run did not complete: %s", r.Error)
		}
		for _, ch := range r.Checks {
			if slices.Contains(strings.Split(check, "|"), ch.Name) && !ch.Pass {
				t.Logf("caught by seed %d: %s: %d failures, first: %v", c.Seed, ch.Name, ch.Failures, ch.Detail[0])
				return ch
			}
		}
		last = r.Checks
	}
	t.Fatalf("a writd that %s passed check %s in %d runs: %v", bug, check, canarySeeds, last)
	return CheckResult{}
}

// canarySeeds bounds the runs a canary gets to be caught.
const canarySeeds = 5

// TestRobustnessCatchesApplyOverrun: a writd built with the
// canary_applyoverrun tag overruns its apply arena on a value over about
// 1 KiB, so the first maximum-size payload the workload draws stops every
// replica at apply (writd's fatal apply stop, exit 3): no-crash must fail.
func TestRobustnessCatchesApplyOverrun(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real writd processes: skipped with -short")
	}
	t.Parallel()
	c := canaryRun(t, "canary_applyoverrun", "no-crash", "overruns its apply buffer on a large value", Config{
		Seed: 3, Hosts: []string{"127.0.70.1", "127.0.70.2", "127.0.70.3"},
		Faults: 1, Kinds: []string{KillFollower}, ClientsPerNode: 1, Instances: 2, HealTimeout: 5 * time.Second,
	})
	if !strings.Contains(strings.Join(c.Detail, "\n"), "exited on its own") {
		t.Fatalf("no-crash failed, but not on a node's own exit: %v", c.Detail)
	}
}

// TestRobustnessCatchesOutcomeStaleCache: a writd built with the
// canary_outcomestalecache tag answers Outcome from the node's own cache
// ahead of the replicated outcome table and never refreshes it, so an
// isolated leader that answered UNCERTAIN keeps saying so for IDs a retry
// elsewhere committed or a fence settled: the nodes disagree (three
// partitions: one leaves a handful of such IDs). Whether the disagreement
// is about an ID no answer decided (uncertain-resolved) or one a client
// was told COMMITTED (acknowledged-not-lost: the stale node answers
// UNAVAILABLE for it) depends on the drawn traffic; either catches it.
func TestRobustnessCatchesOutcomeStaleCache(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real writd processes: skipped with -short")
	}
	t.Parallel()
	if !havePartitions(t, false) {
		t.Skip("needs partitions (NOT RUN without nftables)")
	}
	canaryRun(t, "canary_outcomestalecache", "uncertain-resolved|acknowledged-not-lost", "answers Outcome from a stale local cache", Config{
		Seed: 4, Hosts: []string{"127.0.70.11", "127.0.70.12", "127.0.70.13"},
		Faults: 3, Kinds: []string{PartitionLeader}, ClientsPerNode: 2, Instances: 2, HealTimeout: 20 * time.Second,
	})
}

// TestRobustnessCatchesTerminalStateLeft: a writd built with the
// canary_guardterminalexit tag lets an instance leave a terminal state
// for a non-terminal one (a RETIRED target watched or probed again), over
// the cyclic test domain; check (e) guards must see a read of the
// terminal state followed by another state.
func TestRobustnessCatchesTerminalStateLeft(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real writd processes: skipped with -short")
	}
	t.Parallel()
	c := canaryRun(t, "canary_guardterminalexit", "guards", "lets a machine leave a terminal state", Config{
		Seed: 5, SchemaDir: cyclicSchema, Hosts: []string{"127.0.70.21", "127.0.70.22", "127.0.70.23"},
		Faults: 2, Kinds: []string{KillFollower}, ClientsPerNode: 2, Instances: 2, HealTimeout: 20 * time.Second,
	})
	if !strings.Contains(strings.Join(c.Detail, "\n"), "left terminal state") {
		t.Fatalf("guards failed, but not on a terminal state left: %v", c.Detail)
	}
}

// TestRobustnessCatchesAckBeforeFsync: a writd built with the
// canary_ackbeforefsync tag acknowledges each batch of facts before
// writing and fsyncing it (it is written with the next batch). SIGKILL
// alone rarely shows it: the page cache keeps what was written, and the
// batch held unwritten is committed through the log a moment after its
// acknowledgement unless the node is cut off. fail-fsync-isolated cuts a
// follower off (its facts wait in its outbox), fails its fsyncs, and
// before the restart drops what was appended to its outbox after the
// failure began, as a power loss after the EIO would: the batch the
// canary acknowledged before any fsync is gone, and facts-exactly-once
// must say so. (The drop is drawn per fault, so two faults a seed.)
func TestRobustnessCatchesAckBeforeFsync(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real writd processes: skipped with -short")
	}
	t.Parallel()
	if !havePartitions(t, false) || !haveStrace(t, false) {
		t.Skip("needs partitions and strace (NOT RUN without nftables or strace)")
	}
	c := canaryRun(t, "canary_ackbeforefsync", "facts-exactly-once", "acknowledges facts before their fsync", Config{
		Seed: 6, Hosts: []string{"127.0.80.1", "127.0.80.2", "127.0.80.3"},
		Faults: 2, Kinds: []string{FailFsyncIsolated}, ClientsPerNode: 3, Instances: 2, HealTimeout: 20 * time.Second,
	})
	// Caught means a received fact every node answers for and none has
	// committed, not a node that could not be asked.
	for _, d := range c.Detail {
		if !strings.Contains(d, "unreadable") && !strings.Contains(d, "COMMITTED") {
			t.Logf("lost: %s", d)
			return
		}
	}
	t.Fatalf("facts-exactly-once failed, but not on a fact committed nowhere: %v", c.Detail)
}

// TestRobustnessCatchesConfigFailedAfterActivate: a writd built with the
// canary_configfailedafteractivate tag answers FAILED for a configuration
// change whose activation committed; check (f) config-activation must see
// a change reported FAILED that is activated on every node.
func TestRobustnessCatchesConfigFailedAfterActivate(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real writd processes: skipped with -short")
	}
	t.Parallel()
	c := canaryRun(t, "canary_configfailedafteractivate", "config-activation", "reports an activated configuration change as failed", Config{
		Seed: 7, Hosts: []string{"127.0.80.11", "127.0.80.12", "127.0.80.13"},
		Faults: 1, Kinds: []string{KillFollower}, ClientsPerNode: 1, Instances: 2, HealTimeout: 20 * time.Second,
	})
	if !strings.Contains(strings.Join(c.Detail, "\n"), "reported FAILED") {
		t.Fatalf("config-activation failed, but not on a change reported failed that activated: %v", c.Detail)
	}
}

// TestRobustnessCatchesReuseAccepted: a writd built with the
// canary_reuseaccepted tag answers a committed request ID submitted again
// with another payload as a retry of the first (COMMITTED at its index)
// instead of REJECTED: id-reuse-refused must fail.
func TestRobustnessCatchesReuseAccepted(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real writd processes: skipped with -short")
	}
	t.Parallel()
	c := canaryRun(t, "canary_reuseaccepted", "id-reuse-refused", "accepts a request ID reused with another payload", Config{
		Seed: 7, Hosts: []string{"127.0.70.31", "127.0.70.32", "127.0.70.33"},
		Faults: 1, Kinds: []string{KillFollower}, ClientsPerNode: 2, Instances: 2, HealTimeout: 20 * time.Second,
	})
	if !strings.Contains(strings.Join(c.Detail, "\n"), "answered COMMITTED") {
		t.Fatalf("id-reuse-refused failed, but not on a reuse answered COMMITTED: %v", c.Detail)
	}
}

// TestRobustnessCatchesWatchDrops: a writd built with the
// canary_watchdrops tag leaves the events of every 37th log index out of
// Watch: watch-complete must find a committed ID the run's watcher never
// saw at its index.
func TestRobustnessCatchesWatchDrops(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real writd processes: skipped with -short")
	}
	t.Parallel()
	c := canaryRun(t, "canary_watchdrops", "watch-complete", "leaves events out of Watch", Config{
		Seed: 8, Hosts: []string{"127.0.70.41", "127.0.70.42", "127.0.70.43"},
		Faults: 1, Kinds: []string{KillLeader}, ClientsPerNode: 2, Instances: 2, HealTimeout: 20 * time.Second,
	})
	if !strings.Contains(strings.Join(c.Detail, "\n"), "delivered no event") {
		t.Fatalf("watch-complete failed, but not on a missing event: %v", c.Detail)
	}
}

// TestRobustnessCatchesReceiptAckShort: a writd built with the
// canary_receiptackshort tag acknowledges a receipt of two or more items
// without the last item's ID: receipt-items must find an acknowledgement
// that does not name one ID per item.
func TestRobustnessCatchesReceiptAckShort(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real writd processes: skipped with -short")
	}
	t.Parallel()
	c := canaryRun(t, "canary_receiptackshort", "receipt-items", "leaves an item out of a receipt's acknowledgement", Config{
		Seed: 9, Hosts: []string{"127.0.70.51", "127.0.70.52", "127.0.70.53"},
		Faults: 1, Kinds: []string{KillFollower}, ClientsPerNode: 2, Instances: 2, HealTimeout: 20 * time.Second,
	})
	if !strings.Contains(strings.Join(c.Detail, "\n"), "item IDs for") {
		t.Fatalf("receipt-items failed, but not on a short acknowledgement: %v", c.Detail)
	}
}
