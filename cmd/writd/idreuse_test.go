package main

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/writ-dev/writ/api/writv1"
)

// TestCluster_IDReuseWithDifferentPayload reuses a request ID and a fact
// ID with another payload on three real writd processes, through the
// writctl binary. A retry with the same payload, on any node, gets the
// original answer (COMMITTED at the first index); the same ID with
// another payload is REJECTED ("reused with a different payload", exit
// 3) on every node, before and after the first commit, and the state
// keeps the first payload. A fact ID reused with another payload is
// refused before it is acknowledged, so its reporter is never told
// "received" for a report that will not be applied.
func TestCluster_IDReuseWithDifferentPayload(t *testing.T) {
	c := newCluster(t, "127.0.27.1", "127.0.27.2", "127.0.27.3")
	n1, n2, n3 := c.nodes[0], c.nodes[1], c.nodes[2]
	first := `{"job_id":"j-reuse","queue":"q","priority":1,"command":"first"}`
	second := `{"job_id":"j-reuse","queue":"q","priority":1,"command":"second"}`

	if code, out, errs := c.writctl(n1, "submit", "queue.control", `{"queue":"q","action":"create"}`); code != 0 {
		t.Fatalf("queue.control create: exit %d\n%s%s", code, out, errs)
	}
	committedAt := regexp.MustCompile(`COMMITTED reuse-1 at index (\d+)`)
	code, out, errs := c.writctl(n1, "submit", "job.submit", first, "--id", "reuse-1")
	m := committedAt.FindStringSubmatch(out)
	if code != 0 || m == nil {
		t.Fatalf("first submit: exit %d\n%s%s", code, out, errs)
	}
	index := m[1]
	for _, p := range []*proc{n1, n2, n3} {
		code, out, errs := c.writctl(p, "submit", "job.submit", first, "--id", "reuse-1")
		if m := committedAt.FindStringSubmatch(out); code != 0 || m == nil || m[1] != index {
			t.Fatalf("retry with the same payload on %s: exit %d, want COMMITTED at the first index %s\n%s%s", p.name, code, index, out, errs)
		}
		code, out, errs = c.writctl(p, "submit", "job.submit", second, "--id", "reuse-1")
		want := fmt.Sprintf("request ID reused with a different payload: the ID was first applied at index %s", index)
		if code != exitRejectedCode || !strings.Contains(errs, "REJECTED reuse-1") || !strings.Contains(errs, want) {
			t.Fatalf("reuse with another payload on %s: exit %d (want %d), want %q\nstdout: %s\nstderr: %s", p.name, code, exitRejectedCode, want, out, errs)
		}
	}
	for _, p := range []*proc{n1, n2, n3} {
		code, out, errs := c.writctl(p, "get", "job/j-reuse")
		if code != 0 || !strings.Contains(out, `first`) || strings.Contains(out, `second`) {
			t.Fatalf("job/j-reuse on %s: exit %d, want the first payload only\n%s%s", p.name, code, out, errs)
		}
	}
	// The lookup answers the original result on every node.
	for _, p := range []*proc{n1, n2, n3} {
		code, out, errs := c.writctl(p, "outcome", "reuse-1")
		if code != 0 || !strings.Contains(out, "COMMITTED") || !strings.Contains(out, index) {
			t.Fatalf("outcome reuse-1 on %s: exit %d, want COMMITTED at %s\n%s%s", p.name, code, index, out, errs)
		}
	}

	// Facts: a worker and its usage reports.
	if code, out, errs := c.writctl(n1, "submit", "worker.join", `{"worker_id":"w-reuse","capacity":4}`, "--id", "join-w"); code != 0 {
		t.Fatalf("worker.join: exit %d\n%s%s", code, out, errs)
	}
	usage := func(cpu int) string {
		return fmt.Sprintf(`{"report_id":"u-reuse","worker_id":"w-reuse","seq":1,"cpu_millis":%d,"mem_bytes":10}`, cpu)
	}
	if code, out, errs := c.writctl(n2, "report", "worker.usage", usage(5)); code != 0 {
		t.Fatalf("first usage report: exit %d\n%s%s", code, out, errs)
	}
	refused := func(p *proc, when string) {
		t.Helper()
		code, out, errs := c.writctl(p, "report", "worker.usage", usage(7))
		if code != exitRejectedCode || !strings.Contains(errs, "fact ID reused with a different payload") || strings.Contains(strings.ToLower(out), "received") {
			t.Fatalf("fact ID reused with another payload %s on %s: exit %d (want %d, refused before it is received)\nstdout: %s\nstderr: %s",
				when, p.name, code, exitRejectedCode, out, errs)
		}
	}
	// On the receiving node while the first may still be in its outbox,
	// then on every node once it committed.
	refused(n2, "on the receiving node")
	// the receiving node's outbox drains once the report committed
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		o, err := n2.client.Outbox(ctx, &writv1.OutboxRequest{})
		cancel()
		if err == nil && o.Depth == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the first usage report never left %s's outbox: %v %v", n2.name, o, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, p := range []*proc{n1, n2, n3} {
		refused(p, "after the first committed")
		if code, out, errs := c.writctl(p, "report", "worker.usage", usage(5)); code != 0 {
			t.Fatalf("the same report again on %s (a harmless duplicate): exit %d\n%s%s", p.name, code, out, errs)
		}
	}
}

// exitRejectedCode is writctl's exit code for REJECTED.
const exitRejectedCode = 3
