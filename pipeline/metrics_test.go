package pipeline_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/writ-dev/writ/examples/jobs/jobsgen"
	"github.com/writ-dev/writ/pipeline"
	"github.com/writ-dev/writ/pipeline/pipelinetest"
)

// recordingMetrics_Fake records what the pipeline reports.
type recordingMetrics_Fake struct {
	mu       sync.Mutex
	stages   map[string]int
	outcomes map[string]int // "type/class/outcome"
	latch    int
	refused  map[string]int
	requests []pipeline.RequestTiming
}

func newRecordingMetrics() *recordingMetrics_Fake {
	return &recordingMetrics_Fake{stages: map[string]int{}, outcomes: map[string]int{}, refused: map[string]int{}}
}

func (m *recordingMetrics_Fake) ObserveStage(s string, d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if d < 0 {
		panic("negative stage duration")
	}
	m.stages[s]++
}

func (m *recordingMetrics_Fake) CountOutcome(typ, class, outcome string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.outcomes[typ+"/"+class+"/"+outcome]++
}

func (m *recordingMetrics_Fake) LatchWait() { m.mu.Lock(); m.latch++; m.mu.Unlock() }

func (m *recordingMetrics_Fake) AdmissionRefused(r string) {
	m.mu.Lock()
	m.refused[r]++
	m.mu.Unlock()
}

func (m *recordingMetrics_Fake) RequestDone(t pipeline.RequestTiming) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.requests = append(m.requests, t)
}

// TestMetrics_OutcomesAndStages_FakeLog: every request counts once with its
// outcome (a repeated request ID as duplicate), an invalid entry as a
// refusal, facts as RECEIVED and then once more when committed; every
// stage is observed and each request's timing is reported.
func TestMetrics_OutcomesAndStages_FakeLog(t *testing.T) {
	log := pipelinetest.NewFakeLog()
	m := newRecordingMetrics()
	p := startOnFakeLog(t, log, pipeline.Config{Catalog: jobsgen.Catalog(), Evaluator: pipelinetest.NewFakeEvaluator(),
		DataDir: t.TempDir(), CommitTimeout: 5 * time.Second, RetryMin: time.Millisecond, RetryMax: 20 * time.Millisecond,
		TickInterval: time.Millisecond, Metrics: m})
	ctx, cancel := context.WithCancel(context.Background())
	var cwg sync.WaitGroup
	cwg.Add(1)
	go committer(ctx, log, &cwg)
	defer func() { cancel(); cwg.Wait(); p.Stop() }()

	const n = 16
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			// two queues: same-queue requests wait for each other's latch
			payload := fmt.Sprintf(`{"job_id":"j%d","queue":"q%d","priority":1,"command":"run"}`, i, i%2)
			if o := p.Submit(context.Background(), pipeline.Entry{Type: "job.submit", ID: fmt.Sprintf("r%d", i), Payload: []byte(payload)}); o.Status != pipeline.StatusCommitted {
				t.Errorf("r%d: %s", i, o)
			}
		}(i)
	}
	wg.Wait()
	if o := p.Submit(context.Background(), pipeline.Entry{Type: "job.submit", ID: "r0", Payload: []byte(`{"job_id":"j0","queue":"q0","priority":1,"command":"run"}`)}); !o.Duplicate {
		t.Fatalf("repeated r0: %s", o)
	}
	if o := p.Submit(context.Background(), pipeline.Entry{Type: "job.submit", ID: "bad", Payload: []byte(`{"job_id":1}`)}); o.Status != pipeline.StatusRejected {
		t.Fatalf("invalid payload: %s", o)
	}
	for i := 1; i <= 2; i++ {
		a := p.Report(context.Background(), pipeline.Entry{Type: "worker.usage",
			Payload: []byte(fmt.Sprintf(`{"report_id":"u%d","worker_id":"w","seq":%d,"cpu_millis":1,"mem_bytes":2}`, i, i))})
		if !a.Received {
			t.Fatalf("report u%d: %+v", i, a)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for p.Outbox().Depth > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("outbox not drained: %d", p.Outbox().Depth)
		}
		time.Sleep(5 * time.Millisecond)
	}

	m.mu.Lock()
	defer m.mu.Unlock()
	want := map[string]int{
		"job.submit/request/COMMITTED": n, "job.submit/request/duplicate": 1, "job.submit/request/REJECTED": 1,
		"worker.usage/fact/RECEIVED": 2,
	}
	for k, v := range want {
		if m.outcomes[k] != v {
			t.Errorf("outcome %s = %d, want %d (all: %v)", k, m.outcomes[k], v, m.outcomes)
		}
	}
	factDone := 0
	for _, o := range []string{"COMMITTED", "duplicate", "stale", "quarantined", "REJECTED"} {
		factDone += m.outcomes["worker.usage/fact/"+o]
	}
	if factDone != 2 {
		t.Errorf("facts counted %d times after commit, want 2 (all: %v)", factDone, m.outcomes)
	}
	if m.refused["validation"] != 1 {
		t.Errorf("refusals %v, want validation=1", m.refused)
	}
	for _, s := range []string{"validate", "evaluate", "append", "commit_wait"} {
		if m.stages[s] == 0 {
			t.Errorf("stage %s never observed (%v)", s, m.stages)
		}
	}
	if m.stages["validate"] < n+4 {
		t.Errorf("validate observed %d times for %d entries", m.stages["validate"], n+4)
	}
	if len(m.requests) != n+1 {
		t.Errorf("%d request timings, want %d (one per request that reached the queue)", len(m.requests), n+1)
	}
	for _, r := range m.requests {
		if r.ID == "" || r.Type != "job.submit" || r.Total <= 0 || r.Evaluate+r.Append+r.CommitWait > r.Total+time.Millisecond {
			t.Errorf("request timing %+v", r)
		}
	}
	if m.latch == 0 {
		t.Logf("no latch waits this run (requests on a queue did not overlap)")
	}
}

// TestMetrics_NilIsFine_FakeLog: without Metrics nothing is measured and
// nothing breaks (the nil checks).
func TestMetrics_NilIsFine_FakeLog(t *testing.T) {
	log := pipelinetest.NewFakeLog()
	p := startBackground(t, t.TempDir(), log, pipelinetest.NewFakeEvaluator())
	ctx, cancel := context.WithCancel(context.Background())
	var cwg sync.WaitGroup
	cwg.Add(1)
	go committer(ctx, log, &cwg)
	defer func() { cancel(); cwg.Wait(); p.Stop() }()
	if o := p.Submit(context.Background(), pipeline.Entry{Type: "job.submit", ID: "r1", Payload: []byte(`{"job_id":"j1","queue":"q","priority":1,"command":"run"}`)}); o.Status != pipeline.StatusCommitted {
		t.Fatal(o)
	}
}
