//go:build soak

package robustness

import (
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
