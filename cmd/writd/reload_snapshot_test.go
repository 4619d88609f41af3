package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/writ-dev/writ/api/writv1"
)

// TestCluster_SnapshotCatchUpReloadsConfig (issue 13, defect 5): a node is
// down while a configuration change activates and the leader compacts its
// log past it, so when it returns it catches up by installing a snapshot.
// It must then have reloaded the change (cluster-activated.json written,
// "configuration activated" logged), not only report the committed tag.
// Three real writd processes with the real jobs plugin on 127.0.12.11–13.
func TestCluster_SnapshotCatchUpReloadsConfig(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real writd processes")
	}
	c := newClusterArgs(t, []string{"--raft-snapshot-entries", "10"}, "127.0.12.11", "127.0.12.12", "127.0.12.13")
	lag := c.nodes[2]
	c.kill(lag)
	s := c.nodes[0]
	doc := `{"version":"5","settings":{"commit_timeout":"4s","max_batch":64,"log_level":"debug"}}`
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	st, err := s.client.ConfigUpgrade(ctx, &writv1.ConfigUpgradeRequest{RequestId: "up-5", Document: []byte(doc), Format: "json", TimeoutMs: 10000})
	if err != nil {
		t.Fatal(err)
	}
	var last *writv1.ConfigProgress
	for {
		pr, err := st.Recv()
		if err != nil {
			break
		}
		last = pr
	}
	if last == nil || last.Outcome != writv1.Outcome_COMMITTED {
		t.Fatalf("upgrade with one node down: %v", last)
	}
	if _, err := submit(s, "queue.control", `{"queue":"q","action":"create"}`, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	for i := range 60 {
		if r, err := submit(s, "job.submit", fmt.Sprintf(`{"job_id":"j%d","queue":"q","priority":1,"command":"x"}`, i), 5*time.Second); err != nil || r.Outcome != writv1.Outcome_COMMITTED {
			t.Fatalf("submit %d: %v %v", i, r, err)
		}
	}
	c.start(lag)
	c.waitReady(lag, 40*time.Second)
	c.converge(40 * time.Second)

	logf := lag.dir + ".log"
	activated := filepath.Join(lag.dir, "cluster-activated.json")
	deadline := time.Now().Add(20 * time.Second)
	for {
		b, ferr := os.ReadFile(activated)
		lg, _ := os.ReadFile(logf)
		if ferr == nil && strings.Contains(string(b), `"version":"5"`) && strings.Contains(string(lg), "configuration activated") {
			if !strings.Contains(string(lg), "restored state from snapshot") {
				t.Fatalf("%s caught up without a snapshot: the test did not exercise the restore\n%s", lag.name, lg)
			}
			break
		}
		if time.Now().After(deadline) {
			st, _ := c.status(lag)
			t.Fatalf("%s caught up (status tag %q) but never reloaded the activation: %s: %v\n%s", lag.name, st.GetConfigTag(), activated, ferr, lg)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if st, err := c.status(lag); err != nil || st.ConfigTag != "5" {
		t.Fatalf("%s status: %v %v", lag.name, st, err)
	}
}
