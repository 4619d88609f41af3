package main

import (
	"bytes"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/writ-dev/writ/api/writv1"
)

// TestCluster_CatchUpProgress stops a follower, commits thousands of
// entries without it and restarts it. While it is down the leader's
// Members (and `writctl members`) show it catching up, far behind. Once
// it is back, its own Status, `writctl status` and its writ_catchup_*
// gauges show the catch-up running, then done; its log has the start
// and end lines, and the leader sees it caught up.
func TestCluster_CatchUpProgress(t *testing.T) {
	// No snapshot in the way: the follower receives every entry it
	// missed, so that its catch-up takes seconds rather than one jump;
	// and it stays a member while it is down longer than the default
	// 30s grace.
	c := newMetricsCluster(t, []string{"--raft-snapshot-entries", "1000000", "--membership-failed-grace", "1h"}, "127.0.17.1", "127.0.17.2", "127.0.17.3")
	lead := c.leader(20 * time.Second)
	var f *proc
	for _, p := range c.nodes {
		if p != lead && f == nil {
			f = p
		}
	}
	fams := scrape(t, f)
	if v := total(fams["writ_catchup_active"], nil); v != 0 {
		t.Fatalf("%s writ_catchup_active = %v before any catch-up", f.name, v)
	}

	c.stop(f)
	st0, err := c.status(lead)
	if err != nil {
		t.Fatal(err)
	}
	// ~10000 entries of 1 KiB payloads, so that the catch-up outlasts the
	// follower's first samples (every 250ms) even on an idle machine
	bench(t, c.bin, lead.api(), "--clients", "4", "--ops", "14000", "--size", "1024", "--run", "catchup")
	st1, err := c.status(lead)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("leader commit %d -> %d while %s was down", st0.Commit, st1.Commit, f.name)
	if st1.Commit-st0.Commit < 5000 {
		t.Fatalf("only %d entries committed while %s was down; the test needs a gap of thousands", st1.Commit-st0.Commit, f.name)
	}

	// The leader's view of the stopped member.
	down := memberCatchUp(t, lead, f.name, 10*time.Second, func(cu *writv1.CatchUp) bool { return cu.GetActive() })
	t.Logf("leader's view of %s while down: %+v", f.name, down)
	if down.Target-down.Applied < 5000 || down.EtaMs != 0 || down.EntriesPerSecond != 0 {
		t.Errorf("leader's view of stopped %s: %d behind, %v entries/s, ETA %d ms; want thousands behind, no speed, no ETA",
			f.name, down.Target-down.Applied, down.EntriesPerSecond, down.EtaMs)
	}
	if out := writctlOn(t, c, lead, "members"); !strings.Contains(out, "catching up:") {
		t.Errorf("writctl members on the leader shows no catch-up for stopped %s:\n%s", f.name, out)
	}

	// writctl status runs in a loop of its own from the restart on: a
	// catch-up can be over within a few samples on a fast machine, and a
	// run started only after Status showed it might miss it.
	ctl := watchCtlStatus(t, c, f)
	c.start(f)
	start := time.Now()
	var (
		active, done             *writv1.CatchUp
		firstActive, lastActive  time.Time
		gaugeActive, gaugeBehind float64
	)
	deadline := time.Now().Add(90 * time.Second)
	for done == nil && time.Now().Before(deadline) {
		asked := time.Now()
		if st, err := c.status(f); err == nil && st.CatchUp != nil {
			switch {
			case st.CatchUp.Active:
				if active == nil {
					active, firstActive = st.CatchUp, asked
					t.Logf("%s Status %s after restart: %+v", f.name, time.Since(start).Round(time.Millisecond), active)
				}
				lastActive = time.Now()
			case active != nil:
				done = st.CatchUp
			}
		}
		if gaugeActive == 0 {
			if fm := scrapeQuiet(f); fm != nil && total(fm["writ_catchup_active"], nil) == 1 {
				gaugeActive, gaugeBehind = 1, total(fm["writ_catchup_behind_entries"], nil)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	runs := ctl.stop()
	took := time.Since(start).Round(time.Millisecond)
	if active == nil {
		t.Fatalf("%s never reported a catch-up in Status within %s of its restart", f.name, took)
	}
	if done == nil {
		t.Fatalf("%s never reported its catch-up done within %s of its restart", f.name, took)
	}
	t.Logf("%s done %s after restart: %+v; gauge behind %v; Status showed it running for %s",
		f.name, took, done, gaugeBehind, lastActive.Sub(firstActive).Round(time.Millisecond))
	if active.Target-active.Applied < 1000 {
		t.Errorf("%s Status while catching up: only %d behind", f.name, active.Target-active.Applied)
	}
	if done.Target-done.Applied > 100 || done.Percent != 100 || done.StartedUnixMs == 0 {
		t.Errorf("%s Status when done: %+v; want within 100 of the target, 100%%, a start time", f.name, done)
	}
	if gaugeActive != 1 || gaugeBehind < 1000 {
		t.Errorf("%s writ_catchup_active never 1 with writ_catchup_behind_entries >= 1000 (saw active %v, behind %v)", f.name, gaugeActive, gaugeBehind)
	}
	checkCtlCatchUp(t, f.name, runs, firstActive, lastActive)
	fams = scrape(t, f)
	if a, p := total(fams["writ_catchup_active"], nil), total(fams["writ_catchup_percent"], nil); a != 0 || p != 100 {
		t.Errorf("%s after the catch-up: writ_catchup_active %v, writ_catchup_percent %v; want 0 and 100", f.name, a, p)
	}
	b, _ := os.ReadFile(f.dir + ".log")
	for _, msg := range []string{`msg="raft: catching up"`, `msg="raft: caught up"`} {
		if !bytes.Contains(b, []byte(msg)) {
			t.Errorf("%s log has no %s line", f.name, msg)
		}
	}
	// and the leader sees the member caught up
	memberCatchUp(t, lead, f.name, 10*time.Second, func(cu *writv1.CatchUp) bool { return cu != nil && !cu.Active })
}

// memberCatchUp waits until p's Members shows member id's catch-up
// satisfying ok, and returns it.
func memberCatchUp(t *testing.T, p *proc, id string, d time.Duration, ok func(*writv1.CatchUp) bool) *writv1.CatchUp {
	t.Helper()
	var last *writv1.CatchUp
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if m, err := membersOf(p); err == nil {
			for _, mm := range m.Members {
				if mm.Id == id {
					last = mm.CatchUp
					if ok(last) {
						return last
					}
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s's Members never showed the expected catch-up of %s within %s; last %+v", p.name, id, d, last)
	return nil
}

// writctlOn runs writctl against p's API and returns its output.
func writctlOn(t *testing.T, c *cluster, p *proc, args ...string) string {
	t.Helper()
	out, code := writctl(t, c.bin, append([]string{"--addr", p.api()}, args...)...)
	if code != 0 {
		t.Fatalf("writctl %v on %s: exit %d\n%s", args, p.name, code, out)
	}
	return out
}

// scrapeQuiet is scrape that returns nil while the node does not answer.
func scrapeQuiet(p *proc) map[string]*dto.MetricFamily {
	cl := &http.Client{Timeout: 2 * time.Second}
	resp, err := cl.Get("http://" + p.host + ":7079/metrics")
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil
	}
	tp := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := tp.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil
	}
	return fams
}

// ctlRun is one `writctl status` run: when it ran, its exit and output.
type ctlRun struct {
	start, end time.Time
	code       int
	out        string
}

// ctlLoop runs `writctl status` against one node, one run after another,
// until stop.
type ctlLoop struct {
	once sync.Once
	quit chan struct{}
	done chan []ctlRun
	runs []ctlRun
}

func watchCtlStatus(t *testing.T, c *cluster, p *proc) *ctlLoop {
	t.Helper()
	l := &ctlLoop{quit: make(chan struct{}), done: make(chan []ctlRun, 1)}
	go func() {
		var runs []ctlRun
		for {
			select {
			case <-l.quit:
				l.done <- runs
				return
			default:
			}
			r := ctlRun{start: time.Now()}
			r.out, r.code = writctl(t, c.bin, "--addr", p.api(), "--timeout", "5s", "status")
			r.end = time.Now()
			runs = append(runs, r)
		}
	}()
	t.Cleanup(func() { l.stop() })
	return l
}

func (l *ctlLoop) stop() []ctlRun {
	l.once.Do(func() {
		close(l.quit)
		l.runs = <-l.done
	})
	return l.runs
}

// checkCtlCatchUp checks that writctl status showed the catch-up while it
// ran: every run that started and ended while Status reported it running
// (between firstActive and lastActive) must show the catching-up line,
// and at least one run must have shown it.
func checkCtlCatchUp(t *testing.T, name string, runs []ctlRun, firstActive, lastActive time.Time) {
	t.Helper()
	shown := func(out string) string {
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, "catch-up") && strings.Contains(l, "catching up:") {
				return strings.Join(strings.Fields(l), " ")
			}
		}
		return ""
	}
	var (
		line          string
		inside, blind int
		firstBlind    ctlRun
	)
	for _, r := range runs {
		s := shown(r.out)
		if s != "" && line == "" {
			line = s
		}
		if r.code != 0 || r.start.Before(firstActive) || r.end.After(lastActive) {
			continue
		}
		inside++
		if s == "" {
			if blind == 0 {
				firstBlind = r
			}
			blind++
		}
	}
	if blind > 0 {
		t.Errorf("writctl status on %s: %d of %d runs made while its Status reported the catch-up running showed no catch-up line; the first (%s–%s):\n%s",
			name, blind, inside, firstBlind.start.Format("15:04:05.000"), firstBlind.end.Format("15:04:05.000"), firstBlind.out)
	}
	t.Logf("writctl status on %s: %d runs, %d within the catch-up; line %q", name, len(runs), inside, line)
	if line == "" {
		t.Errorf("writctl status on %s never showed a catch-up line while it ran (%d runs, %d of them while Status reported it)", name, len(runs), inside)
	}
}
