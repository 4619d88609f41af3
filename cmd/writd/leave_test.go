package main

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/writ-dev/writ/api/writv1"
)

// TestLeaveDrainsOutboxFirst runs 3 real writd nodes. With the other two
// killed (no quorum), n1 acknowledges a fact that can only wait in its
// outbox; SIGTERM must then not make n1 leave: after
// membership.leave_drain_timeout it stops as a member with exit 4 and a
// line naming the facts left, and once all three run again the fact
// commits on every node. Then, with its quorum gone again and a longer
// timeout, n1 acknowledges another fact and gets SIGTERM; it waits, the
// others come back, and it leaves (exit 0) only after that fact
// committed, which every remaining node holds.
func TestLeaveDrainsOutboxFirst(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test: skipped with -short")
	}
	c := newClusterArgs(t, []string{"--membership-profile", "local", "--membership-leave-drain-timeout", "2s"},
		"127.0.94.1", "127.0.94.2", "127.0.94.3")
	n1, n2, n3 := c.nodes[0], c.nodes[1], c.nodes[2]
	c.waitVoters(3, 60*time.Second)
	if _, err := submit(n1, "worker.join", `{"worker_id":"w1","capacity":4}`, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	quorumless := func(id, seq string) {
		t.Helper()
		c.kill(n2)
		c.kill(n3)
		<-n2.exited()
		<-n3.exited()
		r, err := report(n1, "worker.usage", `{"report_id":"`+id+`","worker_id":"w1","seq":`+seq+`,"cpu_millis":5,"mem_bytes":1024}`)
		if err != nil || !r.Received {
			t.Fatalf("fact %s not received without quorum: %v %v", id, r, err)
		}
	}

	// 1. The outbox cannot drain: n1 stops as a member, exit 4.
	quorumless("u1", "1")
	if err := n1.signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-n1.exited():
	case <-time.After(30 * time.Second):
		t.Fatal("n1 still running 30s after SIGTERM with a 2s leave drain timeout")
	}
	log := readLog(t, n1)
	if code := n1.exitCode(); code != exitNotLeft {
		t.Fatalf("n1 exited %d on SIGTERM with an undrained outbox, want %d (stopped without leaving); log:\n%s", code, exitNotLeft, log)
	}
	if want := "did not leave the cluster: 1 acknowledged facts in the outbox were not committed"; !strings.Contains(log, want) {
		t.Errorf("n1's output lacks %q", want)
	}
	for _, p := range c.nodes {
		c.start(p)
	}
	c.leader(60 * time.Second)
	c.waitVoters(3, 60*time.Second) // n1 is still a member
	for _, p := range c.nodes {
		if _, err := committedOutcome(p, "fact:worker.usage:u1", 60*time.Second); err != nil {
			t.Errorf("%s: the fact n1 kept: %v", p.name, err)
		}
	}

	// 2. The outbox drains while n1 waits: it leaves after the fact
	// committed.
	c.stop(n1)
	n1.args = []string{"--membership-leave-drain-timeout", "60s"}
	c.start(n1)
	c.waitReady(n1, 60*time.Second)
	quorumless("u2", "2")
	if err := n1.signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	select {
	case <-n1.exited():
		t.Fatalf("n1 exited (code %d) with its outbox undrained and no quorum, before the 60s drain timeout", n1.exitCode())
	default:
	}
	c.start(n2)
	c.start(n3)
	select {
	case <-n1.exited():
	case <-time.After(90 * time.Second):
		t.Fatal("n1 still running 90s after SIGTERM although its quorum came back")
	}
	if code := n1.exitCode(); code != 0 {
		t.Fatalf("n1 exited %d after its outbox drained, want 0 (left); log:\n%s", code, readLog(t, n1))
	}
	for _, p := range []*proc{n2, n3} {
		if _, err := committedOutcome(p, "fact:worker.usage:u2", 60*time.Second); err != nil {
			t.Errorf("%s: the fact n1 drained before leaving: %v", p.name, err)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		m, err := n2.client.Members(ctx, &writv1.MembersRequest{})
		cancel()
		in := err != nil
		for _, x := range m.GetMembers() {
			if x.GetId() == "n1" && x.GetRole() != "" {
				in = true
			}
		}
		if !in {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("n1 still in n2's raft configuration 30s after it left: %v %v", m, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
