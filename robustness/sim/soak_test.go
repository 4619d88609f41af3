//go:build soak

package sim

import (
	"fmt"
	"strings"
	"testing"
)

// TestSimSoak is the longer tier `make soak` runs: 50,000 seeds
// (-sim.seeds or WRITTEST_SIM_SEEDS for another count) from seed 1,000,000.
// Built with -race (as make soak builds it), like TestSim it runs
// raceSeeds of them here and all of them in a build without -race.
func TestSimSoak(t *testing.T) {
	count := 50000
	if n := seedCount(0); n > 0 {
		count = n
	}
	here := count
	if raceEnabled && count > raceSeeds {
		here = raceSeeds
		t.Logf("sim: built with -race: %d of the %d seeds run here, all %d in a build without -race", here, count, count)
	}
	failed, sum := runSeeds(t, 1_000_000, here, "")
	logSummary(t, sum.line())
	for i, r := range failed {
		if i < 10 {
			t.Errorf("seed %d failed: %s\n  reproduce: %s", r.Config.Seed, strings.Join(r.Violations[:min(3, len(r.Violations))], "; "), reproduce(r.Config.Seed, buildTags()))
		}
	}
	if here < count {
		runSeedsWithoutRace(t, "TestSimSoak", count, fmt.Sprintf("-sim.seeds=%d", count))
	}
}
