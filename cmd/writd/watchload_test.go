package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestWatchersReplayingKeepSubmitLatency: 200 watchers that replay the
// whole retained history, over and over, do not raise a real writd's
// median Submit latency above 2x its latency without them. The watchers
// run in their own process (testdata/watchload), as real clients would.
func TestWatchersReplayingKeepSubmitLatency(t *testing.T) {
	c := newClusterArgs(t, []string{"--membership-profile", "local"}, "127.0.43.10")
	n := c.nodes[0]
	load := filepath.Join(c.bin, "watchload")
	t0 := time.Now()
	if _, err := submit(n, "queue.control", `{"queue":"q","action":"create"}`, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	// history: a thousand committed outcomes
	const history = 1000
	for i := 1; i <= history; i++ {
		if _, err := submit(n, "job.submit", fmt.Sprintf(`{"job_id":"h-%d","queue":"q","priority":1,"command":"x"}`, i), 5*time.Second); err != nil {
			t.Fatalf("history submit %d: %v", i, err)
		}
	}
	t.Logf("history of %d written after %v", history, time.Since(t0))
	// latencies of 100 submits; the baseline is measured before and after
	// the load, so noise from other tests on the machine affects both
	samples := func(label string) []time.Duration {
		var d []time.Duration
		for i := 0; i < 100; i++ {
			start := time.Now()
			if _, err := submit(n, "job.submit", fmt.Sprintf(`{"job_id":"%s-%d","queue":"q","priority":1,"command":"x"}`, label, i), 5*time.Second); err != nil {
				t.Fatalf("%s submit %d: %v", label, i, err)
			}
			d = append(d, time.Since(start))
		}
		return d
	}
	median := func(d []time.Duration) time.Duration {
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
		return d[len(d)/2]
	}
	// One trial: the baseline before, the load, the baseline after. On a
	// machine shared with other test processes one trial can fall on a
	// burst of their load; up to three trials run, and the property must
	// hold in one of them (without replay slots and pacing the ratio was
	// ~16x, which no trial meets).
	trial := func(i int) (base, loaded time.Duration) {
		baseSamples := samples(fmt.Sprintf("t%d-base1", i))

		cmd := exec.Command(load, "--addr", n.api(), "--watchers", "200", "--conns", "10", "--history", strconv.Itoa(history))
		cmd.Env = cleanEnv()
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		stopped := false
		stopLoad := func() {
			if !stopped {
				stopped = true
				_ = cmd.Process.Signal(syscall.SIGTERM)
				_ = cmd.Wait()
			}
		}
		defer stopLoad()
		var replayed atomic.Int64
		go func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				if v, ok := strings.CutPrefix(sc.Text(), "replayed "); ok {
					if x, err := strconv.ParseInt(v, 10, 64); err == nil {
						replayed.Store(x)
					}
				}
			}
		}()
		// measure once every watcher has had time to start replaying
		deadline := time.Now().Add(20 * time.Second)
		for replayed.Load() < 200*50 && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		before := replayed.Load()
		start := time.Now()
		loaded = median(samples(fmt.Sprintf("t%d-load", i)))
		// the next progress line from watchload covers the measurement
		for seen := replayed.Load(); replayed.Load() == seen && time.Now().Before(deadline.Add(5*time.Second)); {
			time.Sleep(20 * time.Millisecond)
		}
		during := replayed.Load() - before
		rate := float64(during) / time.Since(start).Seconds()
		stopLoad()
		base = median(append(baseSamples, samples(fmt.Sprintf("t%d-base2", i))...))
		t.Logf("measured after %v", time.Since(t0))
		t.Logf("median Submit latency: %v without watchers, %v with 200 replaying watchers (%.2fx); watchers received %.0f events/s meanwhile", base, loaded, float64(loaded)/float64(base), rate)
		if during < history {
			t.Fatalf("watchers received only %d events during the measurement (stderr %q): the load did not happen", during, stderr.String())
		}
		return base, loaded
	}
	var base, loaded time.Duration
	for i := 1; i <= 3; i++ {
		if base, loaded = trial(i); loaded <= 2*base {
			break
		}
		t.Logf("trial %d: median Submit latency %v with 200 replaying watchers is above 2x the %v without", i, loaded, base)
	}
	if loaded > 2*base {
		t.Errorf("median Submit latency %v with 200 replaying watchers is above 2x the %v without, in three trials", loaded, base)
	}
}
