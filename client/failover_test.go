package client_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/stats"

	"github.com/writ-dev/writ/api/writv1"
	"github.com/writ-dev/writ/client"
	"github.com/writ-dev/writ/examples/jobs/jobsgen"
)

// attempt is one Submit call as it left the client for one endpoint.
type attempt struct {
	target, id, payload string
}

// submitLog records every Submit attempt the client makes (endpoint and
// request ID), and which of them were written to a connection.
type submitLog struct {
	mu       sync.Mutex
	attempts []attempt
	sent     map[string]int // request ID -> attempts written out
}

func (l *submitLog) interceptor(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if r, ok := req.(*writv1.SubmitRequest); ok {
		l.mu.Lock()
		l.attempts = append(l.attempts, attempt{target: cc.Target(), id: r.GetEntry().GetId(), payload: string(r.GetEntry().GetPayload())})
		l.mu.Unlock()
		ctx = context.WithValue(ctx, submitIDKey{}, r.GetEntry().GetId())
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

type submitIDKey struct{}

// sentHandler counts Submit payloads written to a connection.
type sentHandler struct{ l *submitLog }

func (h sentHandler) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }
func (h sentHandler) HandleRPC(ctx context.Context, s stats.RPCStats) {
	if _, ok := s.(*stats.OutPayload); !ok {
		return
	}
	if id, ok := ctx.Value(submitIDKey{}).(string); ok {
		h.l.mu.Lock()
		h.l.sent[id]++
		h.l.mu.Unlock()
	}
}
func (h sentHandler) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }
func (h sentHandler) HandleConn(context.Context, stats.ConnStats)                       {}

func (l *submitLog) of(id string) []attempt {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []attempt
	for _, a := range l.attempts {
		if a.id == id {
			out = append(out, a)
		}
	}
	return out
}

func (l *submitLog) sentCount(id string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.sent[id]
}

// TestFailoverSameRequestID runs a stream of submits through a client whose
// endpoint A is the leader, and kills A (SIGKILL) while a submit is in
// flight on it (its followers paused, so it cannot have answered). The
// client must finish that submit on another endpoint with the same request
// ID, and the cluster must hold every job exactly once, under the ID the
// client reported, with the same committed index on every node.
func TestFailoverSameRequestID(t *testing.T) {
	t.Parallel()
	c := startCluster(t, "127.0.44.1", "127.0.44.2", "127.0.44.3")
	a := c.leader()
	eps := []string{a.api()}
	var others []*node
	for _, n := range c.nodes {
		if n != a {
			eps = append(eps, n.api())
			others = append(others, n)
		}
	}
	log := &submitLog{sent: map[string]int{}}
	cl, err := client.New(client.Config{Endpoints: eps, RequestTimeout: 5 * time.Second,
		DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(log.interceptor), grpc.WithStatsHandler(sentHandler{l: log})}})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := client.SubmitTyped(ctx, cl, jobsgen.QueueControl{Queue: "q1", Action: "create"}); err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{} // job -> request ID the client reported
	index := map[string]uint64{}
	submitJob := func(job string) client.Outcome {
		t.Helper()
		o, err := client.SubmitTyped(ctx, cl, jobsgen.JobSubmit{JobID: job, Queue: "q1", Priority: 1, Command: "run"})
		if err != nil {
			t.Fatalf("submit %s: %v (outcome %+v)", job, err, o)
		}
		ids[job], index[job] = o.RequestID, o.Index
		return o
	}
	for i := range 10 {
		if o := submitJob(fmt.Sprintf("j%d", i)); o.Endpoint != a.api() {
			t.Fatalf("j%d served through %s, want the leader's endpoint %s", i, o.Endpoint, a.api())
		}
	}

	// Pause the followers: A takes the next submit but cannot commit it.
	for _, n := range others {
		c.pause(n)
	}
	type result struct {
		o   client.Outcome
		err error
	}
	done := make(chan result, 1)
	go func() {
		o, err := client.SubmitTyped(ctx, cl, jobsgen.JobSubmit{JobID: "j10", Queue: "q1", Priority: 1, Command: "run"})
		done <- result{o, err}
	}()
	var first []attempt
	c.waitFor("the j10 submit written to A", func() bool {
		log.mu.Lock()
		first = first[:0]
		for _, x := range log.attempts {
			if strings.Contains(x.payload, `"job_id":"j10"`) {
				first = append(first, x)
			}
		}
		log.mu.Unlock()
		return len(first) == 1 && log.sentCount(first[0].id) == 1
	})
	c.kill(a)
	for _, n := range others {
		c.signal(n, syscall.SIGCONT)
	}
	r := <-done
	if r.err != nil {
		t.Fatalf("j10 after killing its endpoint: %v", r.err)
	}
	id := first[0].id
	tries := log.of(id)
	if r.o.RequestID != id || len(tries) < 2 || tries[0].target != a.api() || tries[len(tries)-1].target == a.api() {
		t.Fatalf("j10: outcome %+v, attempts %+v: want the ID %s sent to %s first and retried on another endpoint", r.o, tries, id, a.api())
	}
	for _, x := range tries {
		if x.id != id {
			t.Fatalf("j10 retried with ID %s, want %s", x.id, id)
		}
	}
	ids["j10"], index["j10"] = r.o.RequestID, r.o.Index
	for i := 11; i < 20; i++ {
		submitJob(fmt.Sprintf("j%d", i))
	}
	t.Logf("j10: %d attempts, committed at %d via %s", r.o.Attempts, r.o.Index, r.o.Endpoint)

	// Every node left agrees on each request's outcome and index, and its
	// log applied each job once, under the reported ID.
	marker := submitJob("marker")
	for _, n := range others {
		for job, id := range ids {
			o, err := n.w.Outcome(ctx, &writv1.OutcomeRequest{RequestId: id})
			if err != nil || !o.Known || o.Outcome != writv1.Outcome_COMMITTED || o.Index != index[job] {
				t.Errorf("%s: Outcome(%s) of %s = %v %v, want COMMITTED at %d", n.name, id, job, o, err, index[job])
			}
		}
		s, err := n.w.Watch(ctx, &writv1.WatchRequest{FromIndex: 1, Types: []string{jobsgen.NameJobSubmit}})
		if err != nil {
			t.Fatal(err)
		}
		applied := map[string][]string{} // job -> "status id" of its events
		for {
			ev, err := s.Recv()
			if err != nil {
				t.Fatalf("%s watch: %v", n.name, err)
			}
			applied[ev.Key] = append(applied[ev.Key], ev.Status+" "+ev.Id)
			if ev.Index >= marker.Index {
				break
			}
		}
		for job, id := range ids {
			// The job is applied once, under the reported ID. A retry
			// under the same ID is deduplicated: before it reaches the log
			// when the node already applied the first attempt, or at
			// apply (a recorded duplicate, state unchanged) when both
			// attempts were appended, as when the retry was proposed
			// again at a leader change. A retry under another ID would
			// apply twice.
			got, applies := applied[job], 0
			for _, ev := range got {
				switch ev {
				case "apply req:" + id:
					applies++
				case "duplicate req:" + id:
				default:
					applies = -1
				}
				if applies < 0 {
					break
				}
			}
			if applies != 1 {
				t.Errorf("%s: job %s has events %v, want one apply req:%s and at most recorded duplicates of it", n.name, job, got, id)
			}
		}
	}
}
