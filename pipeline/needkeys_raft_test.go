package pipeline_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/writ-dev/writ/kv"
	"github.com/writ-dev/writ/pipeline"
)

// Loopback addresses for this test: 127.0.96.1–127.0.96.3, kernel-chosen
// ports.

// growingKeysEvaluator is a handler whose fact needs one more key each
// time it is evaluated again, as a holder's session loss needs every lease
// the holder acquired meanwhile. worker.usage (a fact) asks, round by
// round, for probe/0 … probe/k where k is the number of answers it gave
// before, and then writes hot/x. Until it has answered bumps times, each
// answer first moves hot/x through another node (a committed
// worker.update), so the fact's precondition on hot/x fails and it is
// evaluated again. With forever set both types ask for a new key on
// every call and never answer.
type growingKeysEvaluator struct {
	bumps   int
	forever atomic.Bool
	via     atomic.Pointer[pipeline.Pipeline] // where hot/x is moved
	answers atomic.Int64
	calls   atomic.Int64
}

func (g *growingKeysEvaluator) Evaluate(ctx context.Context, items []pipeline.EvalItem) ([]pipeline.EvalResult, error) {
	out := make([]pipeline.EvalResult, len(items))
	for i, it := range items {
		has := map[string]bool{}
		probes := 0
		for _, r := range it.State {
			has[r.Key] = true
			if strings.HasPrefix(r.Key, "probe/") {
				probes++
			}
		}
		switch it.Type {
		case "worker.update": // moves hot/x
			if g.forever.Load() {
				out[i].NeedKeys = []string{fmt.Sprintf("probe/r%d", len(it.State))}
				continue
			}
			if !has["hot/x"] {
				out[i].NeedKeys = []string{"hot/x"}
				continue
			}
			out[i].Effect.Writes = []kv.Write{{Key: "hot/x", Value: []byte(it.ID)}}
		case "worker.usage":
			g.calls.Add(1)
			answered := int(g.answers.Load())
			if g.forever.Load() || probes <= answered || !has["hot/x"] {
				out[i].NeedKeys = []string{fmt.Sprintf("probe/%d", g.calls.Load()), "hot/x"}
				continue
			}
			if answered < g.bumps {
				o := submit(g.via.Load(), "worker.update", fmt.Sprintf("bump-%d", answered), `{"worker_id":"w1","capacity":1}`)
				if o.Status != pipeline.StatusCommitted {
					return nil, fmt.Errorf("test handler: bump %d: %s", answered, o)
				}
			}
			g.answers.Add(1)
			out[i].Effect.Writes = []kv.Write{{Key: "hot/x", Value: []byte(it.ID)}, {Key: "usage/w1", Value: it.Payload}}
		default:
			return nil, fmt.Errorf("test handler: unexpected type %s", it.Type)
		}
	}
	return out, nil
}

// TestFactNeedingMoreKeysEachRetryCommits_Raft: a fact whose handler asks
// for more keys each time a failed precondition has it evaluated again is
// still committed, and a fact whose handler never stops asking stays
// retained and retried, never dropped. Over a real 3-node raftstore
// cluster. Before the fix the pipeline counted key rounds over the fact's
// whole life: after four re-evaluations it "rejected" the fact, which for
// a fact meant finishing it unapplied while its record stayed in the
// outbox, proposed again only if the node restarted (found by the
// robustness suite: a holder.session_lost fact left in a node's outbox).
func TestFactNeedingMoreKeysEachRetryCommits_Raft(t *testing.T) {
	if testing.Short() {
		t.Skip("real cluster")
	}
	ev := &growingKeysEvaluator{bumps: 6}
	c := &rcluster{t: t, evaluator: ev}
	startRaftCluster(t, "127.0.96.%d", nil, c)
	lead := c.leader(10 * time.Second)
	at, other := c.nodes[lead].p, c.nodes[(lead+1)%3].p
	ev.via.Store(other)
	// A follower learns the leader from its first append, and a loaded
	// machine may hold an election meanwhile: until then the submit is
	// (truthfully) UNAVAILABLE, not appended, and safe to repeat.
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		o := submit(other, "worker.update", "seed", `{"worker_id":"w1","capacity":1}`)
		if o.Status == pipeline.StatusCommitted {
			break
		}
		if o.Status != pipeline.StatusUnavailable || time.Now().After(deadline) {
			t.Fatalf("seed hot/x: %s", o)
		}
	}
	ack := at.Report(context.Background(), pipeline.Entry{Type: "worker.usage", ID: "u1",
		Payload: []byte(`{"report_id":"u1","worker_id":"w1","seq":1,"cpu_millis":1,"mem_bytes":1}`)})
	if !ack.Received {
		t.Fatalf("report: %+v", ack)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		st := at.Status(context.Background())
		rec, found, err := c.nodes[lead].node.Get(context.Background(), "usage/w1", false)
		if err == nil && found && len(rec.Value) > 0 && st.OutboxDepth == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("fact not committed within 60s after %d answers and %d evaluations: usage/w1 found=%t, outbox depth %d, queued %d, live facts in flight %d",
				ev.answers.Load(), ev.calls.Load(), found, st.OutboxDepth, st.Queued, st.InFlight)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if a := ev.answers.Load(); a <= int64(ev.bumps) {
		t.Fatalf("the fact committed after %d answers; the handler moved hot/x under it %d times, so it could not have", a, ev.bumps)
	}
	t.Logf("committed after %d answers, %d evaluations", ev.answers.Load(), ev.calls.Load())

	// A handler that never stops asking: the fact is retained and
	// evaluated again and again (with backoff), never finished unapplied.
	ev.forever.Store(true)
	ack = at.Report(context.Background(), pipeline.Entry{Type: "worker.usage", ID: "u2",
		Payload: []byte(`{"report_id":"u2","worker_id":"w1","seq":2,"cpu_millis":1,"mem_bytes":1}`)})
	if !ack.Received {
		t.Fatalf("report u2: %+v", ack)
	}
	time.Sleep(time.Second)
	calls := ev.calls.Load()
	time.Sleep(5 * time.Second)
	st := at.Status(context.Background())
	if st.OutboxDepth != 1 {
		t.Fatalf("outbox depth %d with a fact whose handler never answers; want 1 (retained)", st.OutboxDepth)
	}
	if more := ev.calls.Load() - calls; more == 0 {
		t.Fatalf("the fact whose handler never answers was not evaluated again in 5s: it was dropped, not retained")
	}
	// A request whose handler never stops asking is refused after its
	// fifth request for keys in a row, naming why.
	o := submit(at, "worker.update", "forever", `{"worker_id":"w1","capacity":2}`)
	if o.Status != pipeline.StatusRejected || !strings.Contains(o.Reason, "asked for more keys 5 times in a row") {
		t.Fatalf("request whose handler never answers: %s, want REJECTED naming the key rounds", o)
	}
}
