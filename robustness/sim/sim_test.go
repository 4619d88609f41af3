package sim

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/writ-dev/writ/internal/testsummary"
)

var (
	flagSeed  = flag.Int64("sim.seed", -1, "run only this seed (the reproduce command of a failing seed)")
	flagSeeds = flag.Int("sim.seeds", 0, "seeds to run (default 2000, WRITTEST_SIM_SEEDS)")
	flagFirst = flag.Int64("sim.first", 1, "the first seed")
)

// logSummary logs a run's summary line and records it for a run without -v
// (testsummary).
func logSummary(t *testing.T, line string) {
	t.Helper()
	t.Log(line)
	testsummary.Record(t, t.Name()+" (sim)", line)
}

func seedCount(def int) int {
	if *flagSeeds > 0 {
		return *flagSeeds
	}
	if v, err := strconv.Atoi(os.Getenv("WRITTEST_SIM_SEEDS")); err == nil && v > 0 {
		return v
	}
	return def
}

// runSeeds runs seeds first..first+count-1 on GOMAXPROCS workers and
// reports every failing seed with the command that reruns it.
func runSeeds(t *testing.T, first int64, count int, tags string) (failed []*Result, sum summary) {
	t.Helper()
	seeds := make(chan int64)
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for s := range seeds {
				r := Run(ConfigFor(s, t.TempDir()))
				mu.Lock()
				sum.add(r)
				if len(r.Violations) > 0 {
					failed = append(failed, r)
				}
				mu.Unlock()
			}
		}()
	}
	for s := first; s < first+int64(count); s++ {
		seeds <- s
	}
	close(seeds)
	wg.Wait()
	sum.wall = time.Since(start)
	sort.Slice(failed, func(i, j int) bool { return failed[i].Config.Seed < failed[j].Config.Seed })
	return failed, sum
}

func reproduce(seed int64, tags string) string {
	tagArg := ""
	if tags != "" {
		tagArg = " -tags " + tags
	}
	return fmt.Sprintf("go test%s -count=1 -run 'TestSim$' ./robustness/sim -sim.seed=%d", tagArg, seed)
}

// TestSim runs the seeds of the CI tier (2,000 by default; -sim.seed=N
// runs one). Built with the race detector it runs raceSeeds of them here
// and all of them in a build without it (runSeedsWithoutRace), which is
// ~8x faster.
func TestSim(t *testing.T) {
	first, count := *flagFirst, seedCount(2000)
	if *flagSeed >= 0 {
		first, count = *flagSeed, 1
	}
	if testing.Short() && *flagSeed < 0 {
		count = 100
	}
	here := count
	if raceEnabled && count > raceSeeds {
		here = raceSeeds
		t.Logf("sim: built with -race: %d of the %d seeds run here, all %d in a build without -race", here, count, count)
	}
	failed, sum := runSeeds(t, first, here, "")
	logSummary(t, sum.line())
	for i, r := range failed {
		if i < 10 {
			t.Errorf("seed %d failed: %s\n  reproduce: %s", r.Config.Seed, strings.Join(r.Violations[:min(3, len(r.Violations))], "; "), reproduce(r.Config.Seed, buildTags()))
		}
	}
	if len(failed) > 0 {
		t.Errorf("%d of %d seeds failed", len(failed), here)
	}
	if here < count {
		runSeedsWithoutRace(t, "TestSim", count, fmt.Sprintf("-sim.first=%d", first), fmt.Sprintf("-sim.seeds=%d", count))
	}
}

// TestSimIsDeterministic runs seeds twice and compares the digests of
// their whole traces (every delivery, fsync, apply, crash, submit and
// answer with its simulated time).
func TestSimIsDeterministic(t *testing.T) {
	for _, seed := range []int64{3, 4, 11} {
		a := Run(ConfigFor(seed, t.TempDir()))
		b := Run(ConfigFor(seed, t.TempDir()))
		if a.Digest != b.Digest || a.Stats.Events != b.Stats.Events {
			t.Fatalf("seed %d: two runs differ: digest %s (%d events) vs %s (%d events)", seed, a.Digest, a.Stats.Events, b.Digest, b.Stats.Events)
		}
		if a.Stats.Events < 1000 || a.Stats.Acked == 0 {
			t.Fatalf("seed %d: the run did too little to compare: %+v", seed, a.Stats)
		}
	}
	c := Run(ConfigFor(5, t.TempDir()))
	if d := Run(ConfigFor(3, t.TempDir())); c.Digest == d.Digest {
		t.Fatal("two different seeds gave the same digest: the digest does not cover the trace")
	}
}

// summary is the line a seed batch reports.
type summary struct {
	runs, failed, acked, requests, attempts int
	events, messages, lost, snaps, installs int
	faults                                  map[string]int
	outcomes                                map[string]int
	sim                                     time.Duration
	wall                                    time.Duration
}

func (s *summary) add(r *Result) {
	if s.faults == nil {
		s.faults, s.outcomes = map[string]int{}, map[string]int{}
	}
	s.runs++
	if len(r.Violations) > 0 {
		s.failed++
	}
	st := r.Stats
	s.acked += st.Acked
	s.requests += st.Requests
	s.attempts += st.Attempts
	s.events += st.Events
	s.messages += st.Messages
	s.lost += st.LostWrites
	s.snaps += st.Snapshots
	s.installs += st.SnapshotsInstalled
	s.sim += st.SimTime
	for k, v := range st.Faults {
		s.faults[k] += v
	}
	for k, v := range st.Outcomes {
		s.outcomes[k] += v
	}
}

func kvs(m map[string]int) string {
	var parts []string
	for _, k := range sortedKeys(m) {
		parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
	}
	return strings.Join(parts, " ")
}

func (s *summary) line() string {
	return fmt.Sprintf("sim: seeds=%d failed=%d wall=%s simulated=%s events=%d messages=%d faults (%s) lost-unsynced-writes=%d snapshots=%d installed=%d requests=%d attempts=%d acked=%d answers (%s)",
		s.runs, s.failed, s.wall.Round(time.Millisecond), s.sim.Round(time.Second), s.events, s.messages, kvs(s.faults), s.lost, s.snaps, s.installs, s.requests, s.attempts, s.acked, kvs(s.outcomes))
}
