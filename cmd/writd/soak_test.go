//go:build soak

package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/writ-dev/writ/api/writv1"
	"github.com/writ-dev/writ/internal/proctest"
)

// TestSoak_RepeatedCrashes SIGKILLs a random node (often the leader) every
// few seconds under load for several rounds, restarting it each time, then
// checks that every COMMITTED job and every RECEIVED fact is on every node
// and the replicated state is identical.
func TestSoak_RepeatedCrashes(t *testing.T) {
	c := newCluster(t, "127.0.3.22", "127.0.3.23", "127.0.3.24")
	if _, err := submit(c.nodes[0], "queue.control", `{"queue":"q","action":"create"}`, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := submit(c.nodes[0], "worker.join", `{"worker_id":"w","capacity":8}`, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	committed := map[string]bool{}
	received := map[string]bool{}
	load := proctest.StartLoad(6, func(w, i int) {
		p := c.nodes[(w+i)%len(c.nodes)]
		if w%2 == 0 {
			job := fmt.Sprintf("s%d-%d", w, i)
			r, err := submit(p, "job.submit", fmt.Sprintf(`{"job_id":%q,"queue":"q","priority":1,"command":"x"}`, job), 2*time.Second)
			if err == nil && r.Outcome == writv1.Outcome_COMMITTED {
				mu.Lock()
				committed[job] = true
				mu.Unlock()
			}
		} else {
			id := fmt.Sprintf("u%d-%d", w, i)
			r, err := report(p, "worker.usage", fmt.Sprintf(`{"report_id":%q,"worker_id":"w","seq":%d,"cpu_millis":1,"mem_bytes":1}`, id, w*1_000_000+i))
			if err == nil && r.Received {
				mu.Lock()
				received["fact:worker.usage:"+id] = true
				mu.Unlock()
			}
		}
		time.Sleep(5 * time.Millisecond)
	})
	for round := 0; round < 8; round++ {
		time.Sleep(2 * time.Second)
		victim := c.nodes[rand.IntN(len(c.nodes))]
		if round%2 == 0 {
			victim = c.leader(20 * time.Second)
		}
		t.Logf("round %d: SIGKILL %s", round, victim.name)
		c.kill(victim)
		time.Sleep(2 * time.Second)
		c.start(victim)
		c.waitReady(victim, 60*time.Second)
	}
	load.Stop()
	// facts drain from every outbox
	deadline := time.Now().Add(60 * time.Second)
	for _, p := range c.nodes {
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			ob, err := p.client.Outbox(ctx, &writv1.OutboxRequest{})
			cancel()
			if err == nil && ob.Depth == 0 {
				break
			}
			if time.Now().After(deadline) {
				// say whether the stuck facts were committed (outbox not
				// cleaned up) or never committed (not re-proposed)
				for _, f := range ob.GetFacts() {
					ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
					o, oerr := p.client.Outcome(ctx, &writv1.OutcomeRequest{RequestId: f.Id})
					cancel()
					t.Logf("%s: stuck %s (attempts %d): outcome %v %v", p.name, f.Id, f.Attempts, o, oerr)
				}
				t.Fatalf("%s outbox not drained: depth %d, oldest %dms", p.name, ob.GetDepth(), ob.GetOldestAgeMs())
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	c.converge(60 * time.Second)
	t.Logf("%d jobs committed, %d facts received", len(committed), len(received))
	for _, p := range c.nodes {
		for job := range committed {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			g, err := p.client.Get(ctx, &writv1.GetRequest{Key: "job/" + job, Serializable: true})
			cancel()
			if err != nil || !g.Found {
				t.Errorf("%s: COMMITTED job %s missing: %v", p.name, job, err)
			}
		}
		for id := range received {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			o, err := p.client.Outcome(ctx, &writv1.OutcomeRequest{RequestId: id})
			cancel()
			if err != nil || !o.Known || o.Outcome != writv1.Outcome_COMMITTED {
				t.Errorf("%s: RECEIVED fact %s not committed: %v %v", p.name, id, o, err)
			}
		}
	}
}
