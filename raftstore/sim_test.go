package raftstore

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

var (
	simSeed  = flag.Uint64("sim.seed", 0, "run only this deterministic-simulation seed (TestSim)")
	simSeeds = flag.Int("sim.seeds", 0, "how many deterministic-simulation seeds TestSim runs (0: the tier's default)")
)

// simTierSeeds is how many seeds TestSim runs by default: the CI tier, or
// with -short a smoke run (the soak tag runs more: sim_soak_test.go).
func simTierSeeds() int {
	if testing.Short() {
		return 200
	}
	return 2000
}

// simTags names the build tags of this binary in a reproduce line.
var simTags = ""

// simReproduce is the command that reruns one seed.
func simReproduce(seed uint64) string {
	tags := ""
	if simTags != "" {
		tags = " -tags " + simTags
	}
	return fmt.Sprintf("go test%s ./raftstore -run 'TestSim$' -sim.seed=%d -v", tags, seed)
}

// simDir is where the runs' state.db files live: tmpfs when there is one
// (bbolt fsyncs when it creates a file).
func simDir(t testing.TB) string {
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		d, err := os.MkdirTemp("/dev/shm", "writ-sim-")
		if err == nil {
			t.Cleanup(func() { _ = os.RemoveAll(d) })
			return d
		}
	}
	return t.TempDir()
}

// simResult is one seed's outcome.
type simResult struct {
	seed  uint64
	err   error
	w     *world
	steps int
}

func runSimSeed(t testing.TB, base string, seed uint64) simResult {
	dir := fmt.Sprintf("%s/%d", base, seed)
	w := newWorld(seed, testing.Short(), dir)
	err := w.run()
	_ = os.RemoveAll(dir)
	return simResult{seed: seed, err: err, w: w, steps: w.step}
}

func (r simResult) report() string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d: %v\nplan: %+v\nlast events:\n", r.seed, r.err, r.w.plan)
	tr := r.w.trace
	if len(tr) > 60 {
		tr = tr[len(tr)-60:]
	}
	for _, l := range tr {
		b.WriteString("  " + l + "\n")
	}
	fmt.Fprintf(&b, "reproduce: %s", simReproduce(r.seed))
	return b.String()
}

// runSimSeeds runs seeds first..first+count-1, one run per goroutine at a
// time on GOMAXPROCS goroutines, and returns the failures (in seed order)
// and totals.
func runSimSeeds(t testing.TB, first uint64, count int) (fails []simResult, steps int, stats simStats) {
	base := simDir(t)
	var (
		mu   sync.Mutex
		next atomic.Int64
		wg   sync.WaitGroup
	)
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(count) {
					return
				}
				r := runSimSeed(t, base, first+uint64(i))
				mu.Lock()
				steps += r.steps
				s := r.w.stats
				stats.crashes += s.crashes
				stats.crashesInSave += s.crashesInSave
				stats.partitions += s.partitions
				stats.acks += s.acks
				stats.elections += s.elections
				if r.err != nil {
					fails = append(fails, r)
					if len(fails) >= 3 {
						next.Store(int64(count))
					}
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	sort.Slice(fails, func(i, j int) bool { return fails[i].seed < fails[j].seed })
	return fails, steps, stats
}

// TestSim runs the deterministic simulation over many seeds; -sim.seed=N
// reruns one (its failure prints the line), -sim.seeds=N sets how many.
func TestSim(t *testing.T) {
	first, count := uint64(1), simTierSeeds()
	if *simSeeds > 0 {
		count = *simSeeds
	}
	if *simSeed != 0 {
		first, count = *simSeed, 1
	}
	if v := os.Getenv("WRIT_SIM_SEED"); v != "" && *simSeed == 0 {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("WRIT_SIM_SEED=%q: not a seed; give a positive integer", v)
		}
		first, count = s, 1
	}
	t0 := time.Now()
	fails, steps, st := runSimSeeds(t, first, count)
	el := time.Since(t0)
	for _, f := range fails {
		t.Error(f.report())
	}
	t.Logf("simulation: %d seeds from %d in %v (%.0f seeds/s), %d steps, %d elections, %d acks, %d crashes (%d inside Save), %d partition events, %d failed",
		count, first, el.Round(time.Millisecond), float64(count)/el.Seconds(), steps, st.elections, st.acks, st.crashes, st.crashesInSave, st.partitions, len(fails))
}

// TestSimIsDeterministic runs seeds twice: every event, in order, and the
// outcome must be the same.
func TestSimIsDeterministic(t *testing.T) {
	base := simDir(t)
	for _, seed := range []uint64{3, 7, 11} {
		a, b := runSimSeed(t, base, seed), runSimSeed(t, base, seed)
		ha, hb := a.w.traced.Sum(nil), b.w.traced.Sum(nil)
		if a.steps != b.steps || string(ha) != string(hb) || fmt.Sprint(a.err) != fmt.Sprint(b.err) {
			t.Fatalf("seed %d ran differently twice: %d and %d steps, traces %x and %x, errors %v and %v", seed, a.steps, b.steps, ha[:8], hb[:8], a.err, b.err)
		}
	}
}
