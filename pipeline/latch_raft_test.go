package pipeline_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/writ-dev/writ/examples/jobs/handler"
	"github.com/writ-dev/writ/kv"
	"github.com/writ-dev/writ/pipeline"
	"github.com/writ-dev/writ/raftstore"
)

// Loopback addresses for this test: 127.0.92.1–127.0.92.3, kernel-chosen
// ports.

// applyLog records every command a node applied, in log order.
type applyLog struct {
	*pipeline.Pipeline
	mu   *sync.Mutex
	cmds *[]appliedCmd
}

type appliedCmd struct {
	index uint64
	cmd   kv.Command
	res   kv.Result
}

func (a applyLog) Applied(index uint64, batch []kv.Command, results []kv.Result) {
	a.mu.Lock()
	for i := range batch {
		if i < len(results) {
			*a.cmds = append(*a.cmds, appliedCmd{index: index, cmd: batch[i], res: results[i]})
		}
	}
	a.mu.Unlock()
	a.Pipeline.Applied(index, batch, results)
}

var _ kv.RestoreObserver = applyLog{}

// commandOf is a job.submit command of n runes drawn from sizes that
// cross the schema's bound (4,096 runes) in bytes: one-byte and four-byte
// runes.
func commandOf(rnd *rand.Rand) string {
	n := []int{1, 64, 1000, 2048, 4096}[rnd.IntN(5)]
	r := []string{"x", "é", "€", "𝄞"}[rnd.IntN(4)]
	return strings.Repeat(r, n)
}

// TestReadLatchesReleasedAtAppend_Raft: an entry keeps the latches of the
// keys it writes until it is applied, and gives up those of keys it only
// read when it is appended (latch.go). Over a real 3-node raftstore
// cluster with the real jobs handler, clients submit jobs to a few queues
// (job.submit reads its queue) while others pause and resume the same
// queues (queue.control writes them), all through one node, with commands
// up to the schema's 4,096 four-byte runes and batches cut by a small
// MaxBatchBytes. In the log that node applied, every job.submit that
// applied must find its queue ACTIVE at its position: it read the queue
// after every earlier write of it by this node had applied. Run once
// through the leader and once through a follower, each at 1 to 48
// concurrent submitters. With -tags canary_latchreleasewritten (written
// keys released at the append too) a submit evaluated against a queue
// whose pause was in flight applies after the pause, and the test fails.
func TestReadLatchesReleasedAtAppend_Raft(t *testing.T) {
	if testing.Short() {
		t.Skip("real cluster")
	}
	var mu sync.Mutex
	logs := map[string]*[]appliedCmd{}
	// The check is about order, not latency: a commit timeout of 30 s keeps
	// a machine loaded well past its cores from turning it into UNCERTAIN.
	c := &rcluster{t: t, evaluator: sdkEvaluator{handler.Plugin()}, maxBatchBytes: 48 << 10, commitTimeout: 30 * time.Second}
	c.observe = func(n *rnode, p *pipeline.Pipeline) kv.ApplyObserver {
		mu.Lock()
		defer mu.Unlock()
		if logs[n.cfg.NodeID] == nil {
			logs[n.cfg.NodeID] = new([]appliedCmd)
		}
		return applyLog{Pipeline: p, mu: &mu, cmds: logs[n.cfg.NodeID]}
	}
	startRaftCluster(t, "127.0.92.%d", func(cfg *raftstore.Config) {}, c)
	lead := c.leader(10 * time.Second)
	const queues = 3
	for round, via := range []int{lead, (lead + 1) % 3} {
		p := c.nodes[via].p
		for q := range queues {
			if o := submit(p, "queue.control", fmt.Sprintf("r%d-create-%d", round, q), fmt.Sprintf(`{"queue":"r%d-q%d","action":"create"}`, round, q)); o.Status != pipeline.StatusCommitted {
				t.Fatalf("create queue: %s", o)
			}
		}
		for _, writers := range []int{1, 8, 48} {
			applied := latchRound(t, p, round, writers, queues)
			t.Logf("via node %d, %d submitters: %d submits applied", via, writers, applied)
		}
	}
	for id, cmds := range logs {
		mu.Lock()
		checkReadsInLogOrder(t, id, *cmds)
		mu.Unlock()
	}
}

// latchRound runs writers submitters and two togglers through p for a
// while and returns how many submits committed.
func latchRound(t *testing.T, p *pipeline.Pipeline, round, writers, queues int) int {
	t.Helper()
	var wg sync.WaitGroup
	var committed atomic.Int64
	stop := make(chan struct{})
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rnd := rand.New(rand.NewPCG(uint64(round), uint64(w)))
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				job := fmt.Sprintf("r%d-c%d-w%d-%d", round, writers, w, i)
				payload, _ := json.Marshal(map[string]any{"job_id": job, "queue": fmt.Sprintf("r%d-q%d", round, rnd.IntN(queues)), "priority": 1, "command": commandOf(rnd)})
				o := submit(p, "job.submit", "s-"+job, string(payload))
				switch o.Status {
				case pipeline.StatusCommitted:
					committed.Add(1)
				case pipeline.StatusRejected:
				default:
					t.Errorf("submit %s: %s", job, o)
					return
				}
			}
		}()
	}
	for g := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rnd := rand.New(rand.NewPCG(uint64(round), 1000+uint64(g)))
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				action := []string{"pause", "resume"}[i%2]
				o := submit(p, "queue.control", fmt.Sprintf("r%d-c%d-g%d-%d", round, writers, g, i), fmt.Sprintf(`{"queue":"r%d-q%d","action":%q}`, round, rnd.IntN(queues), action))
				if o.Status != pipeline.StatusCommitted && o.Status != pipeline.StatusRejected {
					t.Errorf("queue.control: %s", o)
					return
				}
				time.Sleep(time.Duration(rnd.IntN(3)) * time.Millisecond)
			}
		}()
	}
	time.Sleep(1500 * time.Millisecond)
	close(stop)
	wg.Wait()
	return int(committed.Load())
}

// checkReadsInLogOrder replays one node's applied commands: every applied
// job.submit must find its queue ACTIVE in the state the log built before
// it.
func checkReadsInLogOrder(t *testing.T, node string, cmds []appliedCmd) {
	t.Helper()
	state := map[string]string{}
	submits := 0
	for _, a := range cmds {
		if a.res.Status != kv.StatusApplied {
			continue
		}
		if a.cmd.Type == "job.submit" && a.cmd.Verdict != uint8(pipeline.VerdictReject) {
			var in struct {
				Queue string `json:"queue"`
			}
			if err := json.Unmarshal(a.cmd.Payload, &in); err != nil {
				t.Fatalf("%s: index %d: %v", node, a.index, err)
			}
			var q struct {
				State string `json:"state"`
			}
			_ = json.Unmarshal([]byte(state["queue/"+in.Queue]), &q)
			if q.State != handler.Active {
				t.Fatalf("%s: job.submit %s applied at index %d on queue %q in state %q: it was evaluated against a queue write still in flight", node, a.cmd.ID, a.index, in.Queue, q.State)
			}
			submits++
		}
		for _, w := range a.cmd.Effect.Writes {
			if w.Delete {
				delete(state, w.Key)
			} else {
				state[w.Key] = string(w.Value)
			}
		}
	}
	if submits == 0 {
		t.Fatalf("%s: no job.submit applied", node)
	}
}
