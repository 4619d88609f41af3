package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/writ-dev/writ/api/writv1"
)

// waitHealth polls every node until its health is want and it counts open
// conflict cases as open.
func (c *cluster) waitHealth(want string, open uint64, d time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(d)
	for _, p := range c.nodes {
		for {
			st, err := c.status(p)
			if err == nil && st.Health == want && st.OpenConflicts == open {
				break
			}
			if time.Now().After(deadline) {
				c.t.Fatalf("%s: health %q open %d (%v), want %q with %d open", p.name, st.GetHealth(), st.GetOpenConflicts(), err, want, open)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// completedJob brings job j1 to COMPLETED through worker w1 (the state a
// late RUNNING report contradicts) and returns the leader.
func completedJob(c *cluster) *proc {
	c.t.Helper()
	l := c.leader(20 * time.Second)
	for _, s := range []struct{ typ, payload string }{
		{"queue.control", `{"queue":"q1","action":"create"}`},
		{"job.submit", `{"job_id":"j1","queue":"q1","priority":3,"command":"run"}`},
		{"worker.join", `{"worker_id":"w1","capacity":2}`},
	} {
		if r, err := submit(l, s.typ, s.payload, 5*time.Second); err != nil || r.Outcome != writv1.Outcome_COMMITTED {
			c.t.Fatalf("%s: %v %v", s.typ, r, err)
		}
	}
	if code, out, errs := c.writctl(l, "deliver", "job.dispatch", `{"dispatch_id":"d1","scheduler":"s","items":[{"job_id":"j1","worker_id":"w1"}]}`); code != 0 {
		c.t.Fatalf("deliver: %d %s %s", code, out, errs)
	}
	if code, out, errs := c.writctl(l, "watch", "--from", "1", "--type", "job.assign", "--count", "1", "--for", "20s"); code != 0 || !strings.Contains(out, "job.assign") {
		c.t.Fatalf("assign: %d %s %s", code, out, errs)
	}
	for _, r := range []string{
		`{"report_id":"r1","job_id":"j1","state":"RUNNING","seq":1,"worker_id":"w1"}`,
		`{"report_id":"r2","job_id":"j1","state":"COMPLETED","seq":2,"worker_id":"w1"}`,
	} {
		if _, err := report(l, "job.state_report", r); err != nil {
			c.t.Fatal(err)
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		code, out, _ := c.writctl(l, "get", "_m/job/j1")
		if code == 0 && strings.Contains(out, "COMPLETED") {
			break
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("j1 never COMPLETED: %s", out)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return l
}

// TestCluster_ConflictResolveEndToEnd (issue 15, item 4): a fact that
// contradicts a terminal state opens a case on every node (health
// degraded); the case keeps the incoming payload and every observation's
// entry ID; `writctl conflicts resolve` closes it through the log, audited
// (who, when, why) and visible on watch, and health returns to ok on all
// three nodes. Three real writd processes on 127.0.41.41–43.
func TestCluster_ConflictResolveEndToEnd(t *testing.T) {
	c := newCluster(t, "127.0.41.41", "127.0.41.42", "127.0.41.43")
	l := completedJob(c)
	// the same contradiction, reported twice on two nodes
	if _, err := report(c.nodes[0], "job.state_report", `{"report_id":"r3","job_id":"j1","state":"RUNNING","seq":3,"worker_id":"w1"}`); err != nil {
		t.Fatal(err)
	}
	c.waitHealth("degraded", 1, 20*time.Second)
	if _, err := report(c.nodes[1], "job.state_report", `{"report_id":"r4","job_id":"j1","state":"RUNNING","seq":4,"worker_id":"w1"}`); err != nil {
		t.Fatal(err)
	}
	var cs struct {
		Case struct {
			Open         bool            `json:"open"`
			Payload      json.RawMessage `json:"payload"`
			Observations []struct {
				EntryID string `json:"entry_id"`
			} `json:"observations"`
			Resolution *struct {
				By, At, Reason string
			} `json:"resolution"`
		} `json:"case"`
	}
	show := func(p *proc) {
		t.Helper()
		code, out, errs := c.writctl(p, "-o", "json", "conflicts", "show", "job/j1")
		if code != 0 {
			t.Fatalf("conflicts show: %d %s %s", code, out, errs)
		}
		if err := json.Unmarshal([]byte(out), &cs); err != nil {
			t.Fatalf("conflicts show -o json: %v\n%s", err, out)
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		show(c.nodes[2])
		if len(cs.Case.Observations) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("observations %+v, want r3 and r4", cs.Case.Observations)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if cs.Case.Observations[0].EntryID != "r3" || cs.Case.Observations[1].EntryID != "r4" || !strings.Contains(string(cs.Case.Payload), `"report_id":"r`) || !cs.Case.Open {
		t.Fatalf("case: %+v payload %s", cs.Case, cs.Case.Payload)
	}
	if code, out, _ := c.writctl(c.nodes[2], "conflicts"); code != 0 || !strings.Contains(out, "1 open conflict cases") || !strings.Contains(out, "_conflict/job/j1") {
		t.Fatalf("conflicts list: %d %s", code, out)
	}
	// bad input: one line naming the fix
	if code, _, errs := c.writctl(c.nodes[2], "conflicts", "resolve", "job/j1"); code != 2 || !strings.Contains(errs, "--reason is required") {
		t.Fatalf("resolve without --reason: %d %s", code, errs)
	}
	if code, _, errs := c.writctl(c.nodes[2], "conflicts", "resolve", "job/nope", "--reason", "x"); code != 3 || !strings.Contains(errs, "no conflict case") {
		t.Fatalf("resolve of no case: %d %s", code, errs)
	}
	st, _ := c.status(c.nodes[2])
	watchFrom := st.GetApplied()
	// resolve on a follower
	f := c.nodes[2]
	if f == l {
		f = c.nodes[1]
	}
	code, out, errs := c.writctl(f, "conflicts", "resolve", "job/j1", "--reason", "job re-run by hand", "--by", "alice")
	if code != 0 || !strings.Contains(out, "COMMITTED _conflict/job/j1 resolved at index") {
		t.Fatalf("resolve: %d %s %s", code, out, errs)
	}
	c.waitHealth("ok", 0, 20*time.Second)
	show(c.nodes[0])
	if cs.Case.Open || cs.Case.Resolution == nil || !strings.HasPrefix(cs.Case.Resolution.By, "alice (") || cs.Case.Resolution.Reason != "job re-run by hand" || cs.Case.Resolution.At == "" {
		t.Fatalf("resolved case: %+v %+v", cs.Case, cs.Case.Resolution)
	}
	// the resolve is on the watch of every node
	for _, p := range c.nodes {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		ws, err := p.client.Watch(ctx, &writv1.WatchRequest{FromIndex: watchFrom, Types: []string{"writ.conflict.resolve"}})
		if err != nil {
			t.Fatal(err)
		}
		ev, err := ws.Recv()
		cancel()
		if err != nil || ev.Key != "_conflict/job/j1" || !strings.HasPrefix(ev.Id, "resolve:_conflict/job/j1") {
			t.Fatalf("%s watch: %v %v", p.name, ev, err)
		}
	}
	// resolving again is a no-op answer, not an error
	if code, out, errs := c.writctl(l, "conflicts", "resolve", "job/j1", "--reason", "again"); code != 0 || !strings.Contains(out, "already resolved") {
		t.Fatalf("resolve again: %d %s %s", code, out, errs)
	}
}

// TestCluster_ConflictResolveApplyIncoming (issue 15, item 4): `writctl
// conflicts resolve KEY --reason TEXT --apply-incoming` closes the case and,
// in the same replicated request-class command, moves the instance to the
// retained incoming fact's state, overriding the guard (COMPLETED → RUNNING
// is not a declared step). Every node then reads the incoming variant, the
// case records what was applied and by whom, the watch shows the resolve
// with verdict override, and health returns to ok. Three real writd
// processes on 127.0.50.41–43.
func TestCluster_ConflictResolveApplyIncoming(t *testing.T) {
	c := newCluster(t, "127.0.50.41", "127.0.50.42", "127.0.50.43")
	l := completedJob(c)
	if _, err := report(c.nodes[0], "job.state_report", `{"report_id":"r3","job_id":"j1","state":"RUNNING","seq":3,"worker_id":"w1"}`); err != nil {
		t.Fatal(err)
	}
	c.waitHealth("degraded", 1, 20*time.Second)
	st, _ := c.status(l)
	watchFrom := st.GetApplied()
	f := c.nodes[2]
	if f == l {
		f = c.nodes[1]
	}
	code, out, errs := c.writctl(f, "conflicts", "resolve", "job/j1", "--reason", "the worker really restarted it", "--by", "bob", "--apply-incoming")
	if code != 0 || !strings.Contains(out, "COMMITTED _conflict/job/j1 resolved at index") ||
		!strings.Contains(out, "applied incoming job.state_report r3: job/j1 COMPLETED -> RUNNING (guard override)") {
		t.Fatalf("resolve --apply-incoming: %d %s %s", code, out, errs)
	}
	c.waitHealth("ok", 0, 20*time.Second)
	for _, p := range c.nodes {
		code, out, errs := c.writctl(p, "get", "_m/job/j1")
		if code != 0 || !strings.Contains(out, `"RUNNING"`) || !strings.Contains(out, `3`) {
			t.Fatalf("%s: _m/job/j1 after apply-incoming: %d %s %s", p.name, code, out, errs)
		}
		code, out, errs = c.writctl(p, "-o", "json", "conflicts", "show", "job/j1")
		var cs struct {
			Case struct {
				Open       bool `json:"open"`
				Resolution *struct {
					By, Reason    string
					ApplyIncoming bool                                         `json:"apply_incoming"`
					Applied       *struct{ EntryID, From, To, Verdict string } `json:"applied"`
				} `json:"resolution"`
			} `json:"case"`
		}
		if code != 0 || json.Unmarshal([]byte(out), &cs) != nil {
			t.Fatalf("%s: conflicts show: %d %s %s", p.name, code, out, errs)
		}
		r := cs.Case.Resolution
		if cs.Case.Open || r == nil || !r.ApplyIncoming || r.Applied == nil || !strings.HasPrefix(r.By, "bob (") ||
			r.Applied.From != "COMPLETED" || r.Applied.To != "RUNNING" || r.Applied.Verdict != "override" {
			t.Fatalf("%s: resolved case %s", p.name, out)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		ws, err := p.client.Watch(ctx, &writv1.WatchRequest{FromIndex: watchFrom, Types: []string{"writ.conflict.resolve"}})
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		ev, err := ws.Recv()
		cancel()
		if err != nil || ev.Key != "_conflict/job/j1" || ev.Status != "override" {
			t.Fatalf("%s watch: %v %v (want the resolve with status override)", p.name, ev, err)
		}
	}
	c.waitHealth("ok", 0, 10*time.Second)
}
