//go:build soak

package robustness

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestRobustnessSoak is the longer tier `make soak` runs:
// WRITTEST_ROBUSTNESS_SOAK_RUNS runs (default 150) of
// WRITTEST_ROBUSTNESS_SOAK_FAULTS faults each (default 3), with 3 clients per
// node, WRITTEST_ROBUSTNESS_LANES clusters at a time (default 3). It prints
// the summary line and the recovery time after heal.
func TestRobustnessSoak(t *testing.T) {
	runs := envInt(t, "WRITTEST_ROBUSTNESS_SOAK_RUNS", 150)
	faults := envInt(t, "WRITTEST_ROBUSTNESS_SOAK_FAULTS", 3)
	base := uint64(time.Now().UnixNano()%1_000_000_000) + 1_000_000_000
	lanes := envInt(t, "WRITTEST_ROBUSTNESS_LANES", 3)
	runTier(t, tier{base: base, runs: runs, faults: faults, lanes: lanes, clientsPerNode: 3, instances: 4})
}

// TestRobustnessSoakSegments runs the soak's long segments, side by side:
// WRITTEST_ROBUSTNESS_SOAK_SEGMENT (default 5m) of faults one after the
// other, on a 3-node cluster (127.0.80.21–23) with only combined faults (a
// partition and a kill, pause or plugin kill at once), and on a 5-node
// cluster (127.0.80.41–45) with every kind of the default mix. Every check
// applies to the whole segment; the resource sampler's growth flags say
// whether a node grew over it.
func TestRobustnessSoakSegments(t *testing.T) {
	t.Parallel()
	seg, err := time.ParseDuration(envOr("WRITTEST_ROBUSTNESS_SOAK_SEGMENT", "5m"))
	if err != nil {
		t.Fatalf("WRITTEST_ROBUSTNESS_SOAK_SEGMENT: %v", err)
	}
	kinds := faultKinds(t)
	bins := binaries(t, "")
	root := runRoot(t)
	base := uint64(time.Now().UnixNano()%1_000_000_000) + 2_000_000_000
	for i, s := range []struct {
		name  string
		hosts []string
		kinds []string
	}{
		{"combined, 3 nodes", []string{"127.0.80.21", "127.0.80.22", "127.0.80.23"}, []string{Combined}},
		{"every kind, 5 nodes", []string{"127.0.80.41", "127.0.80.42", "127.0.80.43", "127.0.80.44", "127.0.80.45"}, kinds},
	} {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			seed := base + uint64(i)
			r := Run(context.Background(), Config{
				Seed: seed, SchemaDir: envOr("WRITTEST_ROBUSTNESS_SCHEMA", jobsSchema), Bins: bins, Hosts: s.hosts, Root: root,
				Faults: 1, FaultsFor: seg, Kinds: s.kinds, ClientsPerNode: 2, Instances: 4,
				Reproduce: fmt.Sprintf("go test -tags soak -count=1 -run 'TestRobustnessSoakSegments' ./robustness/ (seed %d)", seed),
			})
			var sum Summary
			sum.Add(r)
			for _, g := range sum.Growth {
				t.Logf("growth flagged: %s", g)
			}
			t.Logf("segment %s, seed %d: %s, %d faults, recovery %s, %d ops", s.name, seed, r.Duration, len(r.Faults), r.Recovery, opsOf(r))
			printSummary(t, t.Name(), "segment "+s.name+": "+sum.Line())
			if !r.Passed() {
				t.Errorf("segment %s, seed %d failed: %s\n  kept: %s", s.name, seed, strings.Join(r.Failures(), "; "), r.Dir)
			}
		})
	}
}
