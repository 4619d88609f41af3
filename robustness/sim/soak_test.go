//go:build soak

package sim

import (
	"strings"
	"testing"
)

// TestSimSoak is the longer tier `make soak` runs: 50,000 seeds
// (-sim.seeds or WRITTEST_SIM_SEEDS for another count) from seed 1,000,000.
func TestSimSoak(t *testing.T) {
	count := 50000
	if n := seedCount(0); n > 0 {
		count = n
	}
	failed, sum := runSeeds(t, 1_000_000, count, "")
	t.Log(sum.line())
	for i, r := range failed {
		if i < 10 {
			t.Errorf("seed %d failed: %s\n  reproduce: %s", r.Config.Seed, strings.Join(r.Violations[:min(3, len(r.Violations))], "; "), reproduce(r.Config.Seed, buildTags()))
		}
	}
}
