package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/writ-dev/writ/api/writv1"
)

// roleOf is id's raft role as p's Members reports it ("" when absent),
// and its match index.
func roleOf(t *testing.T, p *proc, id string) (string, uint64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	m, err := p.client.Members(ctx, &writv1.MembersRequest{})
	if err != nil {
		return "", 0
	}
	for _, x := range m.Members {
		if x.Id == id {
			return x.Role, x.Match
		}
	}
	return "", 0
}

// TestManualPromotionRealProcesses: two real writd processes with
// membership.auto_promote false. The joined node is admitted as a learner
// and replicates the log, but stays a learner across several reconcile
// rounds; `writctl members promote` refuses an unknown ID with the reason,
// and, sent to the learner itself (forwarded to the leader), makes it a
// voter; the leader logs the change as an operator request.
func TestManualPromotionRealProcesses(t *testing.T) {
	bin := buildBinaries(t)
	c := &cluster{t: t, bin: bin, args: []string{"--membership-auto-promote=false", "--membership-profile", "local"}}
	t.Cleanup(c.stopAll)
	root := t.TempDir()
	n1 := &proc{t: t, name: "n1", host: "127.0.16.161", dir: filepath.Join(root, "n1")}
	c.nodes = append(c.nodes, n1)
	c.start(n1)
	c.waitReady(n1, 20*time.Second)
	if _, err := submit(n1, "queue.control", `{"queue":"q","action":"create"}`, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	n2 := &proc{t: t, name: "n2", host: "127.0.16.162", dir: filepath.Join(root, "n2"), join: n1.gossip()}
	c.nodes = append(c.nodes, n2)
	c.start(n2)

	// Admitted as a learner that has replicated the log.
	deadline := time.Now().Add(40 * time.Second)
	for {
		role, match := roleOf(t, n1, "n2")
		if role == "learner" && match > 0 {
			break
		}
		if role == "voter" {
			t.Fatal("n2 became a voter with membership.auto_promote false")
		}
		if time.Now().After(deadline) {
			t.Fatalf("n2 not admitted as a caught-up learner within 40s (role %q, match %d)", role, match)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Several reconcile rounds (every 2s, and on every gossip event)
	// later it is still a learner.
	for end := time.Now().Add(8 * time.Second); time.Now().Before(end); {
		if role, _ := roleOf(t, n1, "n2"); role != "learner" {
			t.Fatalf("n2 is %q with membership.auto_promote false, want learner until promoted", role)
		}
		time.Sleep(200 * time.Millisecond)
	}

	code, out, errOut := c.writctl(n1, "members", "promote", "n9")
	if code != 2 || !strings.Contains(errOut, "n9") || !strings.Contains(errOut, "not in the raft configuration") {
		t.Fatalf("promote of an unknown node: exit %d, stdout %q, stderr %q; want exit 2 naming n9 and the reason", code, out, errOut)
	}

	code, out, errOut = c.writctl(n2, "members", "promote", "n2")
	if code != 0 || !strings.Contains(out, "PROMOTED n2") || !strings.Contains(out, "by leader n1") {
		t.Fatalf("promote via the learner: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	c.waitVoters(2, 10*time.Second)
	waitLog(t, n1, 5*time.Second, "membership: configuration changed", "action=promote", "member=n2", `reason="operator request"`)
	b, _ := os.ReadFile(n1.dir + ".log")
	if strings.Contains(string(b), `reason="caught up`) {
		t.Fatal("the leader promoted on its own (reason caught up) with membership.auto_promote false")
	}
	code, _, errOut = c.writctl(n1, "members", "promote", "n2")
	if code != 2 || !strings.Contains(errOut, "already a voter") {
		t.Fatalf("second promote: exit %d, stderr %q; want exit 2 already a voter", code, errOut)
	}
}
