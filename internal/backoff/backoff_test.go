package backoff

import (
	"testing"
	"time"

	"github.com/writ-dev/writ/internal/depcheck"
)

func TestStepsDoubleFromMinToMax(t *testing.T) {
	p := Policy{Min: 100 * time.Millisecond, Max: time.Second, Jitter: -1}
	var cur time.Duration
	var got []time.Duration
	for range 7 {
		got = append(got, p.Next(&cur))
	}
	want := []time.Duration{100, 200, 400, 800, 1000, 1000, 1000}
	for i := range want {
		if got[i] != want[i]*time.Millisecond {
			t.Fatalf("delays %v, want %v ms", got, want)
		}
	}
	cur = 0 // reset
	if d := p.Next(&cur); d != p.Min {
		t.Fatalf("after a reset the delay is %s, want Min %s", d, p.Min)
	}
}

func TestStepNeverOverflowsPastMax(t *testing.T) {
	p := Policy{Min: time.Nanosecond, Max: 1<<63 - 1}
	var cur time.Duration
	for range 100 {
		p.Next(&cur)
		if cur <= 0 || cur > p.Max {
			t.Fatalf("step %d out of (0, Max]", cur)
		}
	}
	if q := (Policy{Min: time.Minute, Max: time.Second}); q.Step(0) != time.Second {
		t.Fatalf("Min above Max: first step %s, want Max", q.Step(0))
	}
}

// TestJitterSpreadsWithinBounds: with the default jitter every delay lies in
// (0.8·step, step], and the delays of many retriers are spread, not equal.
func TestJitterSpreadsWithinBounds(t *testing.T) {
	p := Policy{Min: time.Second, Max: 8 * time.Second}
	step := 4 * time.Second
	seen := map[time.Duration]bool{}
	lo, hi := step, time.Duration(0)
	for range 1000 {
		d := p.Delay(step)
		if d <= step*8/10 || d > step {
			t.Fatalf("delay %s outside (%s, %s]", d, step*8/10, step)
		}
		seen[d] = true
		lo, hi = min(lo, d), max(hi, d)
	}
	if len(seen) < 900 || hi-lo < step/10 {
		t.Fatalf("1000 delays: %d distinct, range %s..%s; want them spread over the jitter band", len(seen), lo, hi)
	}
}

func TestFixedSourceIsDeterministic(t *testing.T) {
	p := Policy{Min: time.Second, Max: 8 * time.Second, Jitter: 0.5, Rand: func() float64 { return 0.5 }}
	if d := p.Delay(4 * time.Second); d != 3*time.Second {
		t.Fatalf("delay %s, want 3s (4s shortened by 0.5·0.5)", d)
	}
	p.Rand = func() float64 { return 0 }
	if d := p.Delay(4 * time.Second); d != 4*time.Second {
		t.Fatalf("delay %s, want the step itself from a zero source", d)
	}
}

// TestOnlyStdlib: the pipeline imports this package, and the pipeline may
// import only the standard library, kv, schema/ir and this package (so it
// must itself be stdlib-only).
func TestOnlyStdlib(t *testing.T) {
	depcheck.StdlibAnd(t, "github.com/writ-dev/writ/internal/backoff")
}
