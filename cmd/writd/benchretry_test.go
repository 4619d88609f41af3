package main

import (
	"encoding/json"
	"testing"
	"time"
)

// TestBenchRetryWaitsOutLostQuorum: `writctl bench --retry` against a node
// whose quorum is gone gets UNAVAILABLE or UNCERTAIN at first; it retries
// the same IDs until the other two nodes are back, and every operation
// ends COMMITTED, counted as retried. Without --retry the same run fails
// (checked first, so the check can fail). Three real writd processes.
func TestBenchRetryWaitsOutLostQuorum(t *testing.T) {
	c := newClusterArgs(t, []string{"--membership-failed-grace", "5m"}, "127.0.48.1", "127.0.48.2", "127.0.48.3")
	l := c.leader(20 * time.Second)
	var others []*proc
	for _, p := range c.nodes {
		if p != l {
			others = append(others, p)
		}
	}
	for _, p := range others {
		c.kill(p)
	}
	// each call gives up after 2s: the outage below outlasts one call
	args := []string{"--timeout", "2s", "-o", "json", "bench", "--clients", "1", "--ops", "3", "--type", "queue.control", "--class", "request",
		"--payload", `{"queue":"rq{{run}}{{seq}}","action":"create"}`}
	if code, out, _ := c.writctl(l, append(args, "--run", "plain")...); code == 0 {
		t.Fatalf("without --retry and no quorum, bench succeeded: %s", out)
	}
	type result struct {
		code int
		out  string
	}
	done := make(chan result, 1)
	go func() {
		code, out, errs := c.writctl(l, append(args, "--run", "retried", "--retry", "60s")...)
		done <- result{code, out + errs}
	}()
	time.Sleep(5 * time.Second)
	for _, p := range others {
		c.start(p)
	}
	r := <-done
	if r.code != 0 {
		t.Fatalf("bench --retry: exit %d: %s", r.code, r.out)
	}
	var br benchResult
	if err := json.Unmarshal([]byte(r.out), &br); err != nil {
		t.Fatalf("bench --retry output: %v: %s", err, r.out)
	}
	if br.Ops != 3 || br.Outcomes["COMMITTED"] != 3 || br.Retried < 1 {
		t.Fatalf("bench --retry: %+v: want 3 COMMITTED, at least one retried", br)
	}
	t.Logf("bench --retry across a lost quorum: %+v", br)
}
