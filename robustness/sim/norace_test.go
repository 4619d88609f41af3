package sim

import (
	"context"
	"fmt"
	"os/exec"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/writ-dev/writ/internal/procenv"
)

// raceSeeds is how many seeds TestSim runs in a test binary built with the
// race detector (the race detector makes a seed ~8x slower; these seeds
// still run every goroutine the simulation has, so a data race is found).
// The full count runs in a build without it (runSeedsWithoutRace).
const raceSeeds = 100

// runSeedsWithoutRace runs test (TestSim or TestSimSoak) with its full
// seed count in a subprocess, `go test -race=false -count=1 -run '^TEST$'`
// of this package, with the same build tags and the -sim.* flags given,
// and fails t with the subprocess's output (every failing seed and its
// reproduce line) if any seed fails.
func runSeedsWithoutRace(t *testing.T, test string, count int, simFlags ...string) {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skipf("the %d seeds without the race detector were not run: they run as `go test` of this package and no go command is on PATH (%v); run them with: go test -count=1 -run '^%s$' ./robustness/sim", count, err, test)
	}
	// The subprocess's own -timeout is what stops a hang (with its
	// goroutine dump); the context is a backstop a little later.
	timeout := 30 * time.Minute
	if d, ok := t.Deadline(); ok {
		timeout = time.Until(d) - 45*time.Second
	}
	if timeout <= time.Minute {
		t.Fatalf("sim: %s left before the test deadline, too little for %d seeds without the race detector: raise -timeout", timeout.Round(time.Second), count)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout+15*time.Second)
	defer cancel()
	args := []string{"test", "-race=false", "-count=1", "-run", "^" + test + "$", "-v", "-timeout", timeout.Round(time.Second).String()}
	if tags := buildTags(); tags != "" {
		args = append(args, "-tags", tags)
	}
	args = append(append(args, "."), simFlags...)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Env = procenv.Clean()
	t.Logf("sim: %d seeds without the race detector: go %s", count, strings.Join(args, " "))
	start := time.Now()
	out, err := cmd.CombinedOutput()
	wall := time.Since(start)
	s := string(out)
	if err != nil {
		t.Fatalf("sim: the %d seeds without the race detector failed after %s (%v):\n%s", count, wall.Round(time.Second), err, s)
	}
	if !strings.Contains(s, "--- PASS: "+test+" ") || !strings.Contains(s, fmt.Sprintf("sim: seeds=%d failed=0 ", count)) {
		t.Fatalf("sim: the subprocess passed but did not report %d passing seeds:\n%s", count, s)
	}
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, "sim: seeds=") {
			t.Logf("without -race (%s with the build): %s", wall.Round(time.Second), strings.TrimSpace(l))
		}
	}
}

// buildTags are the -tags this test binary was built with.
func buildTags() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	for _, s := range bi.Settings {
		if s.Key == "-tags" {
			return s.Value
		}
	}
	return ""
}
