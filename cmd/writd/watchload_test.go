package main

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/writ-dev/writ/api/writv1"
)

// TestWatchersReplayingKeepSubmitLatency: 200 watchers that replay the
// whole retained history, over and over, do not raise a real writd's
// median Submit latency above 2x its latency without them.
func TestWatchersReplayingKeepSubmitLatency(t *testing.T) {
	c := newClusterArgs(t, []string{"--membership-profile", "local"}, "127.0.43.10")
	n := c.nodes[0]
	if _, err := submit(n, "queue.control", `{"queue":"q","action":"create"}`, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	// history: a few thousand committed outcomes
	const history = 3000
	var wg sync.WaitGroup
	var next atomic.Int64
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1); i <= history; i = next.Add(1) {
				if _, err := submit(n, "job.submit", fmt.Sprintf(`{"job_id":"h-%d","queue":"q","priority":1,"command":"x"}`, i), 5*time.Second); err != nil {
					t.Errorf("history submit %d: %v", i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	median := func(label string) time.Duration {
		var d []time.Duration
		for i := 0; i < 150; i++ {
			start := time.Now()
			if _, err := submit(n, "job.submit", fmt.Sprintf(`{"job_id":"%s-%d","queue":"q","priority":1,"command":"x"}`, label, i), 5*time.Second); err != nil {
				t.Fatalf("%s submit %d: %v", label, i, err)
			}
			d = append(d, time.Since(start))
		}
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
		return d[len(d)/2]
	}
	base := median("base")

	ctx, cancel := context.WithCancel(context.Background())
	var replayed atomic.Int64
	var ww sync.WaitGroup
	defer func() { cancel(); ww.Wait() }()
	for cn := 0; cn < 10; cn++ {
		conn, err := grpc.NewClient(n.api(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		cl := writv1.NewWritClient(conn)
		for i := 0; i < 20; i++ {
			ww.Add(1)
			go func() {
				defer ww.Done()
				for ctx.Err() == nil {
					// replay the history, then start over
					wc, err := cl.Watch(ctx, &writv1.WatchRequest{})
					if err != nil {
						continue
					}
					for k := 0; k < history; k++ {
						if _, err := wc.Recv(); err != nil {
							break
						}
						replayed.Add(1)
					}
				}
			}()
		}
	}
	// measure once the watchers are all replaying
	deadline := time.Now().Add(10 * time.Second)
	for replayed.Load() < 200*100 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	before := replayed.Load()
	loaded := median("load")
	during := replayed.Load() - before
	t.Logf("median Submit latency: %v without watchers, %v with 200 replaying watchers (%.2fx); %d events replayed while measuring", base, loaded, float64(loaded)/float64(base), during)
	if during < 200*history/10 {
		t.Errorf("watchers replayed only %d events during the measurement: the load did not happen", during)
	}
	if loaded > 2*base {
		t.Errorf("median Submit latency %v with 200 replaying watchers is above 2x the %v without", loaded, base)
	}
}
