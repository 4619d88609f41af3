//go:build soak

package robustness

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// TestRobustnessSoak is the longer tier `make soak` runs:
// WRITTEST_ROBUSTNESS_SOAK_RUNS runs (default 50) of
// WRITTEST_ROBUSTNESS_SOAK_FAULTS faults each (default 3), with 3 clients per
// node. It prints the summary line and the recovery time after heal.
func TestRobustnessSoak(t *testing.T) {
	kinds := faultKinds(t)
	bins := binaries(t, "")
	runs := envInt(t, "WRITTEST_ROBUSTNESS_SOAK_RUNS", 50)
	faults := envInt(t, "WRITTEST_ROBUSTNESS_SOAK_FAULTS", 3)
	base := uint64(time.Now().UnixNano()%1_000_000_000) + 1_000_000_000
	root := runRoot(t)
	var sum Summary
	for i := 0; i < runs; i++ {
		seed := base + uint64(i)
		r := Run(context.Background(), Config{
			Seed: seed, SchemaDir: envOr("WRITTEST_ROBUSTNESS_SCHEMA", jobsSchema), Bins: bins, Hosts: ciHosts, Root: root,
			Faults: faults, Kinds: kinds, ClientsPerNode: 3, Instances: 4,
			Reproduce: fmt.Sprintf("WRITTEST_ROBUSTNESS_SEED=%d WRITTEST_ROBUSTNESS_RUNS=1 WRITTEST_ROBUSTNESS_FAULTS=%d go test -count=1 -run 'TestRobustness$' ./robustness/", seed, faults),
		})
		sum.Add(r)
		if !r.Passed() {
			t.Errorf("seed %d failed: %s\n  reproduce: %s\n  kept: %s", seed, strings.Join(r.Failures(), "; "), r.Reproduce, r.Dir)
		}
	}
	if sum.Failed == 0 && os.Getenv("WRITTEST_ROBUSTNESS_DIR") == "" {
		os.RemoveAll(root)
	}
	fmt.Println(sum.Line())
}
