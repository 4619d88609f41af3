package node

import (
	"testing"
	"time"
)

// TestCatchUpSample follows one catch-up sample by sample: it starts when
// the gap passes catchUpStart, reports share, speed and ETA while it
// runs, has no speed or ETA while the node makes no progress, and ends
// within catchUpDone of the target.
func TestCatchUpSample(t *testing.T) {
	t0 := time.Unix(1000, 0)
	// samples every 0.5s here, whatever the ticker's period: the figures
	// below are per sample
	at := func(i int) time.Time { return t0.Add(time.Duration(i) * 500 * time.Millisecond) }
	var c catchUp
	if st, fin := c.sample(at(0), 100, 150); st || fin || c.active {
		t.Fatalf("a 50-entry gap started a catch-up")
	}
	if st, _ := c.sample(at(1), 100, 5100); !st || !c.active {
		t.Fatalf("a 5000-entry gap did not start a catch-up")
	}
	// it moves a little, then stalls (a node stopped while behind)
	c.sample(at(2), 110, 5100)
	for i := 3; i < 12; i++ {
		c.sample(at(i), 110, 5100)
	}
	w := c.wire()
	if w.EntriesPerSecond != 0 || w.EtaMs != 0 {
		t.Errorf("stalled node: %v entries/s, ETA %d ms; want 0 and unknown", w.EntriesPerSecond, w.EtaMs)
	}
	if w.Percent > 1 {
		t.Errorf("stalled node: %v%% done, want under 1", w.Percent)
	}
	// 1000 entries a sample (2000/s) against a fixed target
	for i, v := 12, uint64(1100); v <= 4100; i, v = i+1, v+1000 {
		c.sample(at(i), v, 5100)
	}
	w = c.wire()
	if !w.Active || w.Percent != 80 {
		t.Errorf("4000 of 5000 entries: active %v, %v%%; want active, 80%%", w.Active, w.Percent)
	}
	if w.EntriesPerSecond < 1500 || w.EntriesPerSecond > 2000 {
		t.Errorf("speed %v entries/s, want about 2000", w.EntriesPerSecond)
	}
	if w.EtaMs < 400 || w.EtaMs > 700 {
		t.Errorf("ETA %d ms for 1000 entries at ~2000/s", w.EtaMs)
	}
	if _, fin := c.sample(at(20), 5050, 5100); !fin || c.active {
		t.Fatalf("within %d of the target the catch-up did not end", catchUpDone)
	}
	if w := c.wire(); w.Active || w.Percent != 100 || w.StartedUnixMs != at(1).UnixMilli() {
		t.Errorf("after the end: %+v", w)
	}
	// the index going back during a catch-up (a member removed and
	// added again) starts over rather than underflowing
	c.sample(at(21), 3000, 9000)
	c.sample(at(22), 10, 9000)
	if w := c.wire(); w.Percent > 1 || w.Applied != 10 {
		t.Errorf("after the index went back: %+v", w)
	}
}
