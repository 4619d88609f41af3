package main

import (
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
	"time"
)

// benchStats collects each operation's latency in the second (since the
// start of the run) in which it completed.
type benchStats struct {
	start time.Time
	total int

	mu    sync.Mutex
	secs  []benchSecond
	done  int
	okEnd []time.Time // completion times of the successful operations
}

type benchSecond struct {
	lat    []time.Duration
	failed int
}

func newBenchStats(start time.Time, total int) *benchStats {
	return &benchStats{start: start, total: total}
}

// add records one operation that completed at end.
func (s *benchStats) add(end time.Time, lat time.Duration, ok bool) {
	k := max(0, int(end.Sub(s.start)/time.Second))
	s.mu.Lock()
	for len(s.secs) <= k {
		s.secs = append(s.secs, benchSecond{})
	}
	s.secs[k].lat = append(s.secs[k].lat, lat)
	if !ok {
		s.secs[k].failed++
	} else {
		s.okEnd = append(s.okEnd, end)
	}
	s.done++
	s.mu.Unlock()
}

// progress is the live line for the second that ended at now: operations
// done so far, the throughput and p99 of that last whole second.
func (s *benchStats) progress(now time.Time) string {
	k := int(now.Sub(s.start)/time.Second) - 1
	s.mu.Lock()
	done := s.done
	var last []time.Duration
	if k >= 0 && k < len(s.secs) {
		last = slices.Clone(s.secs[k].lat)
	}
	s.mu.Unlock()
	slices.Sort(last)
	return fmt.Sprintf("%d/%d ops  %d ops/s  p99 %.2fms", done, s.total, len(last), percentileMs(last, 0.99))
}

// runProgress rewrites the progress line on w once a second until stop is
// closed, then clears it.
func (s *benchStats) runProgress(w io.Writer, stop <-chan struct{}) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-stop:
			fmt.Fprint(w, "\r\x1b[K")
			return
		case now := <-t.C:
			fmt.Fprintf(w, "\r%s\x1b[K", s.progress(now))
		}
	}
}

// percentileMs is the p-th percentile of sorted in milliseconds (0 when empty).
func percentileMs(sorted []time.Duration, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	idx := int(p*float64(len(sorted))+0.5) - 1
	idx = max(0, min(idx, len(sorted)-1))
	return float64(sorted[idx].Microseconds()) / 1000
}

// benchRow is one second of a run.
type benchRow struct {
	Second    int
	Ops       int
	Failed    int
	OpsPerSec float64
	P50, P90  float64
	P99, Max  float64
}

// maxGap is the longest time within [start, end] in which no operation
// completed successfully: the stall a failover causes.
func (s *benchStats) maxGap(end time.Time) time.Duration {
	s.mu.Lock()
	ends := slices.Clone(s.okEnd)
	s.mu.Unlock()
	slices.SortFunc(ends, time.Time.Compare)
	prev, gap := s.start, time.Duration(0)
	for _, t := range append(ends, end) {
		gap = max(gap, t.Sub(prev))
		prev = t
	}
	return gap
}

// rows returns one row per second of a run that lasted elapsed; the last,
// partial second's throughput is scaled by its length.
func (s *benchStats) rows(elapsed time.Duration) []benchRow {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []benchRow
	for k, sec := range s.secs {
		lat := slices.Clone(sec.lat)
		slices.Sort(lat)
		span := time.Second
		if rest := elapsed - time.Duration(k)*time.Second; rest < span && rest > 0 {
			span = rest
		}
		out = append(out, benchRow{Second: k, Ops: len(lat), Failed: sec.failed, OpsPerSec: float64(len(lat)) / span.Seconds(),
			P50: percentileMs(lat, 0.50), P90: percentileMs(lat, 0.90), P99: percentileMs(lat, 0.99), Max: percentileMs(lat, 1)})
	}
	return out
}

// writeBenchCSV writes rows as CSV with a header line.
func writeBenchCSV(w io.Writer, rows []benchRow) error {
	if _, err := fmt.Fprintln(w, "second,ops,failed,ops_per_sec,p50_ms,p90_ms,p99_ms,max_ms"); err != nil {
		return err
	}
	for _, r := range rows {
		if _, err := fmt.Fprintf(w, "%d,%d,%d,%.1f,%.3f,%.3f,%.3f,%.3f\n", r.Second, r.Ops, r.Failed, r.OpsPerSec, r.P50, r.P90, r.P99, r.Max); err != nil {
			return err
		}
	}
	return nil
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
