package client_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/writ-dev/writ/client"
	"github.com/writ-dev/writ/examples/jobs/jobsgen"
)

// TestWatchResumesAcrossEndpointKill reads a watch through the client,
// kills (SIGKILL) the endpoint it reads from, and expects the watch to go
// on from another endpoint with every later event: nothing lost, nothing
// repeated, in log order.
func TestWatchResumesAcrossEndpointKill(t *testing.T) {
	t.Parallel()
	c := startCluster(t, "127.0.44.4", "127.0.44.5", "127.0.44.6")
	var eps []string
	for _, n := range c.nodes {
		eps = append(eps, n.api())
	}
	cl, err := client.New(client.Config{Endpoints: eps, RequestTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	submit := func(job string) {
		t.Helper()
		for attempt := 0; ; attempt++ {
			_, err := client.SubmitTyped(ctx, cl, jobsgen.JobSubmit{JobID: job, Queue: "q1", Priority: 1, Command: "run"})
			if o, ok := client.OutcomeOf(err); ok && o.Status == client.NotCommitted && attempt < 3 {
				// Its ID was fenced while the cluster elected a new
				// leader: definitely not committed, so a new ID is safe.
				continue
			}
			if err != nil {
				t.Fatalf("submit %s: %v", job, err)
			}
			return
		}
	}
	if _, err := client.SubmitTyped(ctx, cl, jobsgen.QueueControl{Queue: "q1", Action: "create"}); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		submit(fmt.Sprintf("j%d", i))
	}
	w, err := cl.Watch(ctx, client.WatchOptions{FromIndex: 1, Types: []string{jobsgen.NameJobSubmit}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var last uint64
	recv := func(want string) client.Event {
		t.Helper()
		ev, err := w.Recv()
		for err == nil && ev.Status == "not_committed" {
			// a late attempt whose ID was fenced (submit resubmitted
			// it under a new ID): it changed nothing
			ev, err = w.Recv()
		}
		if err != nil {
			t.Fatalf("watch, waiting for %s: %v", want, err)
		}
		if ev.Key != want || ev.Index <= last {
			t.Fatalf("watch delivered %s at %d (after index %d), want %s next", ev.Key, ev.Index, last, want)
		}
		last = ev.Index
		return ev
	}
	var from string
	for i := range 5 {
		from = recv(fmt.Sprintf("j%d", i)).Endpoint
	}
	var victim *node
	for _, n := range c.nodes {
		if n.api() == from {
			victim = n
		}
	}
	c.kill(victim)
	for i := 5; i < 10; i++ {
		submit(fmt.Sprintf("j%d", i))
	}
	for i := 5; i < 10; i++ {
		if ev := recv(fmt.Sprintf("j%d", i)); ev.Endpoint == from {
			t.Fatalf("j%d read from the killed endpoint %s", i, from)
		}
	}
	if w.Resumes() < 1 {
		t.Fatalf("watch resumed %d times, want at least once", w.Resumes())
	}
}
