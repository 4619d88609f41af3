package robustness

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// fiveHosts are the addresses of the CI tier's 5-node runs.
var fiveHosts = []string{"127.0.49.1", "127.0.49.2", "127.0.49.3", "127.0.49.4", "127.0.49.5"}

// TestRobustnessFiveNodes runs the CI tier's checks on a 5-node cluster:
// 2 runs of 2 faults (one of them with two nodes killed at once, which a
// 5-node cluster survives with its quorum).
func TestRobustnessFiveNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real writd processes: skipped with -short")
	}
	t.Parallel()
	bins := binaries(t, "")
	root := runRoot(t)
	var sum Summary
	for i, kinds := range [][]string{{KillTwo, PartitionLeader}, {KillLeader, KillPlugin, PartitionOneWay, StopLeader}} {
		seed := uint64(500 + i)
		r := Run(context.Background(), Config{
			Seed: seed, SchemaDir: jobsSchema, Bins: bins, Hosts: fiveHosts, Root: root,
			Faults: 2, Kinds: kinds, ClientsPerNode: 1, Instances: 3,
			Reproduce: fmt.Sprintf("go test -count=1 -run 'TestRobustnessFiveNodes$' ./robustness/ (seed %d)", seed),
		})
		sum.Add(r)
		t.Logf("5 nodes, seed %d: %s, faults %v, recovery %s, %d ops, keys linearizable %d/%d", seed, r.Duration, faultNames(r.Faults), r.Recovery, opsOf(r), r.Lin.Linearized, r.Lin.Checked)
		if !r.Passed() {
			t.Errorf("5 nodes, seed %d failed: %s\n  reproduce: %s\n  kept: %s", seed, strings.Join(r.Failures(), "; "), r.Reproduce, r.Dir)
		}
	}
	printSummary(t, t.Name(), "5 nodes: "+sum.Line())
}

func faultNames(fs []Fault) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.Kind)
	}
	return out
}
