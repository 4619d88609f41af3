package sim

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/writ-dev/writ/internal/procenv"
)

// TestCanarySim is what the canary build runs: its seeds must fail.
func TestCanarySim(t *testing.T) {
	if !canaryAckBeforeFsync {
		t.Skip("only in the canary_raftackbeforefsync build (TestSimCatchesAckBeforeFsync runs it)")
	}
	failed, sum := runSeeds(t, 1, seedCount(300), "canary_raftackbeforefsync")
	t.Log(sum.line())
	for i, r := range failed {
		if i < 3 {
			t.Logf("seed %d: %s", r.Config.Seed, strings.Join(r.Violations[:min(2, len(r.Violations))], "; "))
		}
	}
	if len(failed) > 0 {
		t.Errorf("CANARY CAUGHT: %d seeds failed", len(failed))
	}
}

// TestSimCatchesAckBeforeFsync builds and runs this package with the
// canary_raftackbeforefsync tag (the appender acknowledges appends and
// votes before their fsync) as a subprocess; some seed's checks must fail.
func TestSimCatchesAckBeforeFsync(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the package with a canary tag: skipped with -short")
	}
	if canaryAckBeforeFsync {
		t.Skip("this is the canary build")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "test", "-count=1", "-tags", "canary_raftackbeforefsync", "-run", "^TestCanarySim$", "-v", ".", "-sim.seeds=100")
	cmd.Env = procenv.Clean()
	out, err := cmd.CombinedOutput()
	s := string(out)
	if !strings.Contains(s, "CANARY CAUGHT") {
		t.Fatalf("the canary build was not caught (err %v):\n%s", err, s)
	}
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, "sim: seeds=") || strings.Contains(l, "CANARY CAUGHT") || strings.Contains(l, "seed ") {
			t.Log(strings.TrimSpace(l))
		}
	}
}
