package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/api/writv1"
)

// loadResult is one load phase: admitted latencies, and the request IDs
// by outcome.
type loadResult struct {
	admitted []time.Duration
	// steady: the admitted latencies of calls started in the phase's
	// steady window (after the warm-up, when every client sends at once)
	steady    []time.Duration
	committed []string
	refused   []string // UNAVAILABLE "overloaded" (definite)
	other     []string
	took      time.Duration
}

// loadShape is how long a load phase runs: every client submits, one call
// after the other, from the start until warmup+steady; the calls started
// in the steady window are the phase's samples. A fixed duration (not a
// fixed count of calls) gives both phases enough steady samples whatever
// their throughput.
type loadShape struct {
	warmup, steady time.Duration
	rounds         int
}

// overloadShape is the test's default shape (small, it runs in make test),
// or the benchmark's with WRITTEST_OVERLOAD_BENCH=1.
func overloadShape() loadShape {
	if os.Getenv("WRITTEST_OVERLOAD_BENCH") == "1" {
		return loadShape{warmup: time.Second, steady: 4 * time.Second, rounds: 2}
	}
	return loadShape{warmup: 500 * time.Millisecond, steady: time.Second, rounds: 1}
}

func (r *loadResult) p99() time.Duration { return pct(r.admitted, 99) }

func (r *loadResult) steadyPct(p int) time.Duration { return pct(r.steady, p) }

func (r *loadResult) merge(o *loadResult) {
	r.admitted = append(r.admitted, o.admitted...)
	r.steady = append(r.steady, o.steady...)
	r.committed = append(r.committed, o.committed...)
	r.refused = append(r.refused, o.refused...)
	r.other = append(r.other, o.other...)
	r.took += o.took
}

func pct(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[min(len(s)-1, len(s)*p/100)]
}

// loadPhase runs clients goroutines for the shape's warm-up and steady
// window, each submitting jobs on p one after the other over shared gRPC
// connections, and classifies every answer.
func loadPhase(t *testing.T, p *proc, run string, clients int, shape loadShape) *loadResult {
	t.Helper()
	var conns []writv1.WritClient
	for range 64 {
		cc, err := grpc.NewClient(p.api(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Close()
		conns = append(conns, writv1.NewWritClient(cc))
	}
	var mu sync.Mutex
	res := &loadResult{}
	var begin time.Time // set before start is closed
	var wg sync.WaitGroup
	start := make(chan struct{})
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl := conns[c%len(conns)]
			<-start
			end := begin.Add(shape.warmup + shape.steady)
			// a refused attempt is retried after the hinted pause (backing
			// off), as a new request (so every refused ID must stay absent)
			refusals := 0
			for i := 0; time.Now().Before(end); i++ {
				id := fmt.Sprintf("%s-%d-%d", run, c, i)
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				t0 := time.Now()
				r, err := cl.Submit(ctx, &writv1.SubmitRequest{Entry: &writv1.Entry{Type: "job.submit", Id: id,
					Payload: []byte(fmt.Sprintf(`{"job_id":%q,"queue":"oq%d","priority":1,"command":"x"}`, id, c))}})
				d := time.Since(t0)
				cancel()
				od, _ := api.OutcomeFromError(err)
				overloaded := od != nil && od.Outcome == writv1.Outcome_UNAVAILABLE && strings.HasPrefix(od.Reason, "overloaded: ")
				mu.Lock()
				switch {
				case err == nil && r.Outcome == writv1.Outcome_COMMITTED:
					res.admitted = append(res.admitted, d)
					if since := t0.Sub(begin); since >= shape.warmup {
						res.steady = append(res.steady, d)
					}
					res.committed = append(res.committed, id)
				case overloaded:
					if st, _ := status.FromError(err); st.Code() != codes.Unavailable {
						t.Errorf("overloaded request %s: gRPC code %s, want UNAVAILABLE", id, st.Code())
					}
					res.refused = append(res.refused, id)
				default:
					res.other = append(res.other, fmt.Sprintf("%s: %v %v", id, r, err))
				}
				mu.Unlock()
				if !overloaded {
					refusals = 0
					continue
				}
				// exponential backoff from the hinted 50ms, with jitter
				back := 50 * time.Millisecond << min(refusals, 5)
				refusals++
				time.Sleep(back/2 + time.Duration(rand.Int64N(int64(back))))
			}
		}()
	}
	begin = time.Now()
	close(start)
	wg.Wait()
	res.took = time.Since(begin)
	return res
}

// TestCluster_OverloadAdmission (issue 15, item 5): with max_inflight
// enforced, 2,000 concurrent clients on the leader get either COMMITTED or
// UNAVAILABLE "overloaded" (retried after the hinted pause, backing off,
// as a new request), no refused request is in the state and every
// committed one is; the steady admitted p99 is logged against the
// 100-client one (asserted ≤ 2× with WRITTEST_OVERLOAD_BENCH=1, which also runs
// longer phases: see overloadShape). Then, with the
// quorum gone, the outbox bound refuses facts with RESOURCE_EXHAUSTED
// before acknowledging them, and every acknowledged fact commits once the
// quorum is back. Three real writd processes on 127.0.41.51–53.
func TestCluster_OverloadAdmission(t *testing.T) {
	const overClients = 2000
	c := newClusterArgs(t, []string{"--pipeline-max-inflight", "64", "--pipeline-outbox-max-entries", "40"}, "127.0.41.51", "127.0.41.52", "127.0.41.53")
	l := c.leader(20 * time.Second)
	// one queue per client: jobs on one queue serialise on its latch
	var wg sync.WaitGroup
	errs := make(chan error, overClients)
	for w := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for q := w; q < overClients; q += 50 {
				if r, err := submit(l, "queue.control", fmt.Sprintf(`{"queue":"oq%d","action":"create"}`, q), 10*time.Second); err != nil || r.Outcome != writv1.Outcome_COMMITTED {
					errs <- fmt.Errorf("queue oq%d: %v %v", q, r, err)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// Interleaved rounds, pooled: the machine's load varies over time, and
	// both sides see the same mix of it. Every phase runs for the same
	// fixed time; its samples are the admitted calls started after the
	// warm-up.
	shape := overloadShape()
	base, over := &loadResult{}, &loadResult{}
	for round := range shape.rounds {
		b := loadPhase(t, l, fmt.Sprintf("base%d", round), 100, shape)
		o := loadPhase(t, l, fmt.Sprintf("over%d", round), overClients, shape)
		t.Logf("round %d: 100 clients: %d committed (%d steady), %d refused overloaded, steady p50 %v p99 %v, in %v; %d clients: %d committed (%d steady), %d refused overloaded, steady admitted p50 %v p99 %v (max %v), in %v",
			round, len(b.committed), len(b.steady), len(b.refused), b.steadyPct(50), b.steadyPct(99), b.took,
			overClients, len(o.committed), len(o.steady), len(o.refused), o.steadyPct(50), o.steadyPct(99), o.steadyPct(100), o.took)
		base.merge(b)
		over.merge(o)
	}
	ratio := float64(over.steadyPct(99)) / float64(max(base.steadyPct(99), 1))
	t.Logf("overload benchmark (%d × %v warm-up + %v steady): 100 clients: %d steady samples, p50 %v p99 %v, %d refused; %d clients: %d steady samples, admitted p50 %v p99 %v, %d refused (UNAVAILABLE overloaded), p99 including warm-up %v; ratio %.2f (bound 2.00)",
		shape.rounds, shape.warmup, shape.steady, len(base.steady), base.steadyPct(50), base.steadyPct(99), len(base.refused),
		overClients, len(over.steady), over.steadyPct(50), over.steadyPct(99), len(over.refused), over.p99(), ratio)
	if len(base.other)+len(over.other) > 0 {
		t.Fatalf("answers neither COMMITTED nor overloaded: %v %v", base.other, over.other)
	}
	if len(over.refused) == 0 {
		t.Fatal("2000 clients against max_inflight 64: nothing refused, admission control did not act")
	}
	// The latency bound is a benchmark: on a machine shared with other
	// CPU-bound work (the clients run on it too) it measures the machine.
	// WRITTEST_OVERLOAD_BENCH=1 asserts it; the figures are always logged.
	if os.Getenv("WRITTEST_OVERLOAD_BENCH") == "1" {
		// Errorf: the refusal and fact checks below still run.
		if len(over.steady) < 100 || len(base.steady) < 100 {
			t.Errorf("too few steady-state samples: %d with 2000 clients, %d with 100", len(over.steady), len(base.steady))
		}
		if ratio > 2 {
			t.Errorf("steady admitted p99 with 2000 clients %v > 2 × %v (100 clients): ratio %.2f", over.steadyPct(99), base.steadyPct(99), ratio)
		}
	}
	// every refusal is definite: absent from the state on every node; every
	// commit present
	c.converge(40 * time.Second)
	for _, p := range c.nodes {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		// the benchmark's longer phases leave ~100k jobs (12 MB of
		// records), past gRPC's default 4 MiB receive limit: List is one
		// message, not paged
		lr, err := p.client.List(ctx, &writv1.ListRequest{Prefix: "job/"}, grpc.MaxCallRecvMsgSize(256<<20))
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		have := map[string]bool{}
		for _, r := range lr.Records {
			have[strings.TrimPrefix(r.Key, "job/")] = true
		}
		for _, id := range over.refused {
			if have[id] {
				t.Fatalf("%s: refused request %s is in the state", p.name, id)
			}
		}
		for _, id := range append(base.committed, over.committed...) {
			if !have[id] {
				t.Fatalf("%s: committed request %s is not in the state", p.name, id)
			}
		}
	}
	st, err := c.status(l)
	if err != nil || st.Admission == nil || st.Admission.MaxInflight != 64 || st.Admission.RefusedRequests < uint64(len(over.refused)) {
		t.Fatalf("status admission: %v %v", st.GetAdmission(), err)
	}

	// facts: no quorum, so the outbox fills up to its bound
	f := c.nodes[0]
	for _, p := range c.nodes[1:] {
		c.kill(p)
	}
	var acked, refused []string
	for i := 0; len(refused) < 5 && i < 200; i++ {
		id := fmt.Sprintf("of%d", i)
		_, err := report(f, "job.state_report", fmt.Sprintf(`{"report_id":%q,"job_id":"base-0-0","state":"RUNNING","seq":%d,"worker_id":"w1"}`, id, i+1))
		if err == nil {
			acked = append(acked, id)
			continue
		}
		st, _ := status.FromError(err)
		if st.Code() != codes.ResourceExhausted || !strings.Contains(st.Message(), "overloaded: fact outbox full") {
			t.Fatalf("fact %s beyond the bound: %v, want RESOURCE_EXHAUSTED overloaded", id, err)
		}
		refused = append(refused, id)
	}
	if len(acked) != 40 || len(refused) == 0 {
		t.Fatalf("%d facts acknowledged, %d refused; want 40 then refusals", len(acked), len(refused))
	}
	t.Logf("facts without a quorum: %d acknowledged, %d refused RESOURCE_EXHAUSTED (outbox bound 40)", len(acked), len(refused))
	for _, p := range c.nodes[1:] {
		c.start(p)
	}
	for _, p := range c.nodes {
		c.waitReady(p, 40*time.Second)
	}
	deadline := time.Now().Add(40 * time.Second)
	for _, p := range c.nodes {
		for _, id := range acked {
			for {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				o, err := p.client.Outcome(ctx, &writv1.OutcomeRequest{RequestId: "fact:job.state_report:" + id})
				cancel()
				if err == nil && o.Known && o.Outcome == writv1.Outcome_COMMITTED {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s: acknowledged fact %s not committed: %v %v", p.name, id, o, err)
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
		for _, id := range refused {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			o, err := p.client.Outcome(ctx, &writv1.OutcomeRequest{RequestId: "fact:job.state_report:" + id})
			cancel()
			if err == nil && o.Known && o.Outcome == writv1.Outcome_COMMITTED {
				t.Fatalf("%s: refused fact %s committed", p.name, id)
			}
		}
	}
}
