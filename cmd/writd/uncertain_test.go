package main

import (
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/writ-dev/writ/internal/proctest"
)

var uncertainLine = regexp.MustCompile(`UNCERTAIN (r-[0-9a-f]{32})`)

// TestWritctl_UncertainWhenTheLeaderNeverAnswers runs the real writctl
// against a follower while the leader is paused (SIGSTOP): the follower
// forwards the request to a leader that never answers, so the request has
// left writctl and its fate is unknown. writctl must say UNCERTAIN (exit 5,
// never 4) on one line with the ID it generated and the lookup command.
// Once the leader runs again, a retry with that ID answers COMMITTED, and
// `writctl outcome ID` agrees on every node.
func TestWritctl_UncertainWhenTheLeaderNeverAnswers(t *testing.T) {
	c := newCluster(t, "127.0.44.30", "127.0.44.31", "127.0.44.32")
	l := c.leader(20 * time.Second)
	var f *proc
	for _, p := range c.nodes {
		if p != l {
			f = p
		}
	}
	ctl := func(args ...string) (string, int) {
		t.Helper()
		return writctl(t, c.bin, args...)
	}
	if out, code := ctl("--addr", f.api(), "submit", "queue.control", `{"queue":"q1","action":"create"}`); code != 0 {
		t.Fatalf("queue create through %s: exit %d: %s", f.name, code, out)
	}
	if err := l.signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.signal(syscall.SIGCONT) }) // before the cluster stops
	proctest.WaitStopped(t, l.pid())
	job := `{"job_id":"j1","queue":"q1","priority":1,"command":"run"}`
	out, code := ctl("--addr", f.api(), "--timeout", "2s", "submit", "job.submit", job)
	m := uncertainLine.FindStringSubmatch(out)
	if code != 5 || m == nil || strings.Count(strings.TrimSpace(out), "\n") != 0 {
		t.Fatalf("submit while the leader is paused: exit %d (want 5, one line with the ID): %s", code, out)
	}
	id := m[1]
	if !strings.Contains(out, "`writctl outcome "+id+"`") {
		t.Fatalf("the UNCERTAIN line does not show the lookup command for %s: %s", id, out)
	}
	if err := l.signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	out, code = ctl("--addr", f.api(), "submit", "--id", id, "job.submit", job)
	if code != 0 || !strings.Contains(out, "COMMITTED "+id+" at index ") {
		t.Fatalf("retry of %s: exit %d: %s", id, code, out)
	}
	at := strings.Fields(out[strings.Index(out, "at index "):])[2]
	for _, p := range c.nodes {
		deadline := time.Now().Add(20 * time.Second)
		for {
			o, code := ctl("--addr", p.api(), "outcome", id)
			if code == 0 && strings.Contains(o, id+" COMMITTED at index "+at) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: outcome %s: exit %d: %s; want COMMITTED at index %s", p.name, id, code, o, at)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}
