package main

import (
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestReplaceNodeUnderItsOwnNameRealProcesses rebuilds a member of three
// real writd processes the way docs/operator.md says: n1 (the bootstrap
// node, which may lead: SIGTERM hands leadership over first) leaves on
// SIGTERM and exits 0, the leader removes it, its data directory is
// deleted, and it starts again with --join and the same node ID and
// addresses. Snapshots are rare, so it catches up from log entries, which
// hold its predecessor's removal: it must apply that without stopping,
// be promoted to voter, serve, and converge with the others.
func TestReplaceNodeUnderItsOwnNameRealProcesses(t *testing.T) {
	c := newClusterArgs(t, []string{"--membership-profile", "local", "--raft-snapshot-entries", "100000"}, "127.0.98.11", "127.0.98.12", "127.0.98.13")
	c.waitVoters(3, 60*time.Second)
	n1, n2, n3 := c.nodes[0], c.nodes[1], c.nodes[2]
	if _, err := submit(c.leader(20*time.Second), "queue.control", `{"queue":"q","action":"create"}`, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	jobs := func(on *proc, tag string, n int) {
		t.Helper()
		for i := 0; i < n; i++ {
			var err error
			for try := 0; try < 20; try++ {
				if _, err = submit(on, "job.submit", fmt.Sprintf(`{"job_id":"%s-%d","queue":"q","priority":1,"command":"x"}`, tag, i), 10*time.Second); err == nil {
					break
				}
				time.Sleep(250 * time.Millisecond)
			}
			if err != nil {
				t.Fatalf("job %s-%d on %s: %v", tag, i, on.name, err)
			}
		}
	}
	jobs(n2, "before", 20)

	// SIGTERM: n1 leaves and exits 0; the leader removes it.
	_ = n1.signal(syscall.SIGTERM)
	select {
	case <-n1.exited():
	case <-time.After(60 * time.Second):
		t.Fatal("n1 did not exit within 60s of SIGTERM")
	}
	if code := n1.exitCode(); code != 0 {
		t.Fatalf("n1 exited %d on SIGTERM, want 0", code)
	}
	waitFor(t, 60*time.Second, "the leader no longer lists n1", func() bool {
		for _, p := range []*proc{n2, n3} {
			if st, err := c.status(p); err == nil && st.IsLeader {
				role, _ := roleOf(t, p, "n1")
				return role == ""
			}
		}
		return false
	})
	jobs(n3, "between", 20)

	// Rebuild: wipe the data directory, start again joining through n2.
	if err := os.RemoveAll(n1.dir); err != nil {
		t.Fatal(err)
	}
	logStart := logSize(n1)
	n1.join = n2.gossip()
	c.start(n1)
	jobs(n2, "after", 20)
	waitFor(t, 90*time.Second, "n1 a voter again", func() bool {
		if !n1.running() {
			t.Fatalf("the rebuilt n1 exited (code %d):\n%s", n1.exitCode(), strings.Join(n1.n().LogTail(20), "\n"))
		}
		for _, p := range []*proc{n2, n3} {
			if st, err := c.status(p); err == nil && st.IsLeader {
				role, _ := roleOf(t, p, "n1")
				return role == "voter"
			}
		}
		return false
	})
	c.waitReady(n1, 60*time.Second)
	jobs(n1, "served", 5)
	c.converge(90 * time.Second)
	if !n1.running() {
		t.Fatalf("the rebuilt n1 exited (code %d)", n1.exitCode())
	}
	log := logSince(t, n1, logStart)
	if strings.Contains(log, "removed from the cluster") {
		t.Fatalf("the rebuilt n1 logged its removal:\n%s", log)
	}
	if !strings.Contains(log, "applied the removal of an earlier incarnation of this node") {
		t.Fatalf("the rebuilt n1 did not catch up through its predecessor's removal (a snapshot instead?):\n%s", strings.Join(n1.n().LogTail(40), "\n"))
	}
}

func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func logSize(p *proc) int64 {
	fi, err := os.Stat(p.n().Log)
	if err != nil {
		return 0
	}
	return fi.Size()
}

func logSince(t *testing.T, p *proc, off int64) string {
	b, err := os.ReadFile(p.n().Log)
	if err != nil {
		t.Fatal(err)
	}
	if off > int64(len(b)) {
		off = 0
	}
	return string(b[off:])
}
