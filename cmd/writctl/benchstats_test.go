package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/writ-dev/writ/internal/proctest"
)

func TestBenchStatsRowsAndCSV(t *testing.T) {
	t0 := time.Unix(1000, 0)
	s := newBenchStats(t0, 6)
	ms := time.Millisecond
	s.add(t0.Add(100*ms), 1*ms, true)
	s.add(t0.Add(900*ms), 3*ms, true)
	s.add(t0.Add(950*ms), 2*ms, false)
	// nothing completes in second 1
	s.add(t0.Add(2100*ms), 10*ms, true)
	s.add(t0.Add(2200*ms), 20*ms, true)
	if got := s.progress(t0.Add(1000 * ms)); got != "5/6 ops  3 ops/s  p99 3.00ms" {
		t.Fatalf("progress after second 0: %q", got)
	}
	if got := s.progress(t0.Add(2000 * ms)); got != "5/6 ops  0 ops/s  p99 0.00ms" {
		t.Fatalf("progress after the idle second: %q", got)
	}
	rows := s.rows(2500 * ms)
	if len(rows) != 3 {
		t.Fatalf("rows: %+v", rows)
	}
	var b bytes.Buffer
	if err := writeBenchCSV(&b, rows); err != nil {
		t.Fatal(err)
	}
	want := "second,ops,failed,ops_per_sec,p50_ms,p90_ms,p99_ms,max_ms\n" +
		"0,3,1,3.0,2.000,3.000,3.000,3.000\n" +
		"1,0,0,0.0,0.000,0.000,0.000,0.000\n" +
		"2,2,0,4.0,10.000,20.000,20.000,20.000\n" // 2 ops in the last half second
	if b.String() != want {
		t.Fatalf("csv:\n%s\nwant:\n%s", b.String(), want)
	}
}

func TestBenchProgressLine(t *testing.T) {
	s := newBenchStats(time.Now(), 10)
	var b proctest.Buffer
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { s.runProgress(&b, stop); close(done) }()
	s.add(time.Now(), time.Millisecond, true)
	time.Sleep(1300 * time.Millisecond)
	close(stop)
	<-done
	out := b.String()
	if !strings.HasPrefix(out, "\r1/10 ops  ") || !strings.HasSuffix(out, "\r\x1b[K") {
		t.Fatalf("progress output %q", out)
	}
}

func TestBenchSVG(t *testing.T) {
	var b bytes.Buffer
	rows := []benchRow{{Second: 0, Ops: 3, OpsPerSec: 3}, {Second: 1, Ops: 5, OpsPerSec: 5}}
	if err := writeBenchSVG(&b, "t<&>", rows, []time.Duration{3 * time.Millisecond, time.Millisecond, 2 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if !strings.HasPrefix(out, "<svg ") || strings.Count(out, "<polyline") != 2 || !strings.Contains(out, "t&lt;&amp;&gt;") || !strings.HasSuffix(out, "</svg>\n") {
		t.Fatalf("svg:\n%s", out)
	}
}
