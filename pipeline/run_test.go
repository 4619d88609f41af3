package pipeline_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/writ-dev/writ/examples/jobs/jobsgen"
	"github.com/writ-dev/writ/pipeline"
	"github.com/writ-dev/writ/pipeline/pipelinetest"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// startOnFakeLog builds a pipeline over log from cfg (NodeID, DataDir and
// Logger default to "n1", a temporary directory and quiet()), hands the log
// its Checker and Observer, starts it and stops it when the test ends.
func startOnFakeLog(t testing.TB, log *pipelinetest.FakeLog, cfg pipeline.Config) *pipeline.Pipeline {
	t.Helper()
	cfg.Log = log
	if cfg.NodeID == "" {
		cfg.NodeID = "n1"
	}
	if cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	if cfg.Logger == nil {
		cfg.Logger = quiet()
	}
	p, err := pipeline.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	log.Checker, log.Observer = p.Checker(), p
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Stop() })
	return p
}

// committer commits the fake log's pending batches in the background, the
// way consensus would.
func committer(ctx context.Context, l *pipelinetest.FakeLog, wg *sync.WaitGroup) {
	defer wg.Done()
	for {
		for l.CommitNext() {
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(200 * time.Microsecond):
		}
	}
}

func startBackground(t *testing.T, dir string, log *pipelinetest.FakeLog, ev pipeline.Evaluator) *pipeline.Pipeline {
	t.Helper()
	return startOnFakeLog(t, log, pipeline.Config{Catalog: jobsgen.Catalog(), Evaluator: ev,
		DataDir: dir, CommitTimeout: 5 * time.Second, RetryMin: time.Millisecond, RetryMax: 20 * time.Millisecond,
		TickInterval: time.Millisecond})
}

// TestConcurrentRequests_FakeLog runs the real background loop (goroutines,
// system clock) with many concurrent requesters over the generated jobs
// catalog: every request is COMMITTED, same-key requests serialise through
// latches, and evaluation is batched.
func TestConcurrentRequests_FakeLog(t *testing.T) {
	log := pipelinetest.NewFakeLog()
	ev := pipelinetest.NewFakeEvaluator()
	p := startBackground(t, t.TempDir(), log, ev)
	ctx, cancel := context.WithCancel(context.Background())
	var cwg sync.WaitGroup
	cwg.Add(1)
	go committer(ctx, log, &cwg)
	defer func() { cancel(); cwg.Wait(); p.Stop() }()

	w := p.Watch(0, pipeline.Filter{Types: []string{"job.submit"}})
	const n = 64
	var wg sync.WaitGroup
	outs := make([]pipeline.Outcome, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			// 4 queues: requests on the same queue contend for its latch
			payload := fmt.Sprintf(`{"job_id":"j%d","queue":"q%d","priority":1,"command":"run"}`, i, i%4)
			outs[i] = p.Submit(context.Background(), pipeline.Entry{Type: "job.submit", ID: fmt.Sprintf("r%d", i), Payload: []byte(payload)})
		}(i)
	}
	wg.Wait()
	for i, o := range outs {
		if o.Status != pipeline.StatusCommitted || o.Index == 0 {
			t.Fatalf("request %d: %s", i, o)
		}
		if o.Index > log.Index() {
			t.Fatalf("request %d replied at %d before apply %d", i, o.Index, log.Index())
		}
	}
	seen := 0
	wctx, wcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer wcancel()
	for seen < n {
		if _, err := w.Next(wctx); err != nil {
			t.Fatalf("watch after %d events: %v", seen, err)
		}
		seen++
	}
	maxBatch := 0
	for _, b := range ev.Batches {
		maxBatch = max(maxBatch, b)
	}
	t.Logf("handler calls=%d max batch=%d log entries=%d", len(ev.Batches), maxBatch, log.Index())
	if got, ok := p.OutcomeOf("r7"); !ok || got.Status != pipeline.StatusCommitted {
		t.Fatalf("OutcomeOf r7: %v %v", got, ok)
	}
}

// TestFactsSurviveRestart_FakeLog: facts reported with no leader are
// fsync'd into a real outbox file; the node restarts (new pipeline, same
// data dir); once a leader exists the drainer commits them without the
// reporter resending.
func TestFactsSurviveRestart_FakeLog(t *testing.T) {
	dir := t.TempDir()
	log := pipelinetest.NewFakeLog()
	ev := pipelinetest.NewFakeEvaluator()
	log.SetLeader(false)
	p := startBackground(t, dir, log, ev)
	for i := 0; i < 5; i++ {
		a := p.Report(context.Background(), pipeline.Entry{Type: "worker.usage",
			Payload: []byte(fmt.Sprintf(`{"report_id":"u%d","worker_id":"w1","seq":%d,"cpu_millis":1,"mem_bytes":2}`, i, i))})
		if !a.Received {
			t.Fatalf("report %d not received: %+v", i, a)
		}
	}
	time.Sleep(20 * time.Millisecond) // drainer retries against no leader
	if d := p.Outbox().Depth; d != 5 {
		t.Fatalf("outbox depth %d, want 5", d)
	}
	if err := p.Stop(); err != nil {
		t.Fatal(err)
	}
	log.SetLeader(true)
	p2 := startBackground(t, dir, log, ev)
	defer p2.Stop()
	ctx, cancel := context.WithCancel(context.Background())
	var cwg sync.WaitGroup
	cwg.Add(1)
	go committer(ctx, log, &cwg)
	defer func() { cancel(); cwg.Wait() }()
	deadline := time.Now().Add(5 * time.Second)
	for p2.Outbox().Depth != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("outbox not drained: %+v", p2.Outbox())
		}
		time.Sleep(2 * time.Millisecond)
	}
	for i := 0; i < 5; i++ {
		if _, ok := log.Outcome(fmt.Sprintf("fact:worker.usage:u%d", i)); !ok {
			t.Fatalf("fact u%d not committed", i)
		}
	}
}

// TestJobsCatalogGuards_FakeLog drives the generated jobs catalog through
// the harness: binary and JSON ingress, a dispatch receipt, state reports
// and a terminal regression that opens a conflict case.
func TestJobsCatalogGuards_FakeLog(t *testing.T) {
	h, err := pipelinetest.NewHarness(t.TempDir(), jobsgen.Catalog())
	if err != nil {
		t.Fatal(err)
	}
	defer h.P.Stop()
	ctx := context.Background()
	bin, err := (&jobsgen.JobSubmit{JobID: "j1", Queue: "q1", Priority: 5, Command: "make"}).AppendBinary(nil)
	if err != nil {
		t.Fatal(err)
	}
	hd := h.P.SubmitAsync(ctx, pipeline.Entry{Type: "job.submit", ID: "r1", Format: pipeline.FormatBinary, Payload: bin})
	h.Drain()
	if o := hd.Outcome(); o.Status != pipeline.StatusCommitted {
		t.Fatalf("binary submit: %s", o)
	}
	a := h.P.Deliver(ctx, pipeline.Entry{Type: "job.dispatch", Payload: []byte(`{"dispatch_id":"d1","scheduler":"s1","items":[{"job_id":"j1","worker_id":"w1"}]}`)})
	if !a.Received || len(a.ItemIDs) != 1 {
		t.Fatalf("deliver: %+v", a)
	}
	h.Drain()
	for i, st := range []string{"RUNNING", "COMPLETED"} {
		a := h.P.Report(ctx, pipeline.Entry{Type: "job.state_report",
			Payload: []byte(fmt.Sprintf(`{"report_id":"s%d","job_id":"j1","state":"%s","seq":%d,"worker_id":"w1"}`, i, st, i+1))})
		if !a.Received {
			t.Fatalf("report: %+v", a)
		}
		h.Drain()
	}
	a = h.P.Report(ctx, pipeline.Entry{Type: "job.state_report", Payload: []byte(`{"report_id":"s9","job_id":"j1","state":"RUNNING","seq":9,"worker_id":"w1"}`)})
	if !a.Received {
		t.Fatalf("report: %+v", a)
	}
	h.Drain()
	rec, ok, _ := h.Log.Get(ctx, "_m/job/j1", false)
	if !ok || string(rec.Value) != `{"state":"COMPLETED","scope":"w1","order":2}` {
		t.Fatalf("machine record %s", rec.Value)
	}
	hl, open, err := h.P.Health(ctx)
	if err != nil || hl != pipeline.HealthDegraded || open != 1 {
		t.Fatalf("health %s open=%d err=%v", hl, open, err)
	}
	cs, _ := h.P.Conflicts(ctx)
	if len(cs) != 1 || cs[0].Current != "COMPLETED" || cs[0].Incoming != "RUNNING" || cs[0].EntryID != "s9" {
		t.Fatalf("conflicts %+v", cs)
	}
	// bad input names the field and the rule
	o := h.P.Submit(ctx, pipeline.Entry{Type: "job.submit", ID: "r2", Payload: []byte(`{"job_id":"BAD ID","queue":"q1","priority":1,"command":"x"}`)})
	if o.Status != pipeline.StatusRejected || o.Field != "job_id" || o.Rule == "" {
		t.Fatalf("bad input: %s", o)
	}
	big := `{"job_id":"j2","queue":"q1","priority":1,"command":"` + strings.Repeat("x", 2<<20) + `"}`
	o = h.P.Submit(ctx, pipeline.Entry{Type: "job.submit", ID: "r3", Payload: []byte(big)})
	if o.Status != pipeline.StatusRejected || o.Field != "payload" {
		t.Fatalf("oversized: %s", o)
	}
	if len(h.Violations) > 0 {
		t.Fatal(h.Violations)
	}
}

// TestStrictPanicsOnUnclassified_FakeLog: with Strict set (as the `strict`
// build tag does) an unclassified type at ingress panics.
func TestStrictPanicsOnUnclassified_FakeLog(t *testing.T) {
	p, err := pipeline.New(pipeline.Config{Catalog: pipelinetest.FakeCatalog(), Evaluator: pipelinetest.NewFakeEvaluator(),
		DataDir: t.TempDir(), Strict: true, Manual: true, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "W6") {
			t.Fatalf("expected a W6 panic, got %v", r)
		}
	}()
	p.Report(context.Background(), pipeline.Entry{Type: "job.legacy", Payload: []byte(`{"report_id":"x"}`)})
}

// TestConfigUpgradeBlocking_FakeLog: the blocking ConfigUpgrade returns
// COMMITTED only after activation applied, and the reload hook ran.
func TestConfigUpgradeBlocking_FakeLog(t *testing.T) {
	log := pipelinetest.NewFakeLog()
	var mu sync.Mutex
	var reloads []string
	p := startOnFakeLog(t, log, pipeline.Config{Catalog: jobsgen.Catalog(), Evaluator: pipelinetest.NewFakeEvaluator(),
		TickInterval:      time.Millisecond,
		OnConfigActivated: func(a pipeline.ConfigActivation) { mu.Lock(); reloads = append(reloads, a.ID); mu.Unlock() }})
	ctx, cancel := context.WithCancel(context.Background())
	var cwg sync.WaitGroup
	cwg.Add(1)
	go committer(ctx, log, &cwg)
	defer func() { cancel(); cwg.Wait(); p.Stop() }()
	doc := `{"version":"1.2","settings":{"commit_timeout":"5s","max_batch":64,"log_level":"info"}}`
	o := p.ConfigUpgrade(context.Background(), pipeline.Entry{Type: "cluster.config", ID: "v12", Payload: []byte(doc)})
	if o.Status != pipeline.StatusCommitted {
		t.Fatalf("config upgrade: %s", o)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(reloads) != 1 || reloads[0] != "v12" {
		t.Fatalf("reloads %v", reloads)
	}
	tag, ok, err := p.CommittedConfig(context.Background(), false)
	if err != nil || !ok || tag.ID != "v12" || tag.Generation != 1 {
		t.Fatalf("tag %+v %v %v", tag, ok, err)
	}
}

// TestBatchByteBudget_FakeLog: a flush stops adding entries when their
// payloads exceed MaxBatchBytes, so one proposal never outgrows the log's
// limits; the rest go in the next batches.
func TestBatchByteBudget_FakeLog(t *testing.T) {
	log := pipelinetest.NewFakeLog()
	ev := pipelinetest.NewFakeEvaluator()
	p := startOnFakeLog(t, log, pipeline.Config{Catalog: pipelinetest.FakeCatalog(), Evaluator: ev, Manual: true, MaxBatchBytes: 100})
	ctx := context.Background()
	var hs []*pipeline.Handle
	for i := 0; i < 3; i++ {
		pl := fmt.Sprintf(`{"job_id":"j%d","queue":"q%d","command":"%s"}`, i, i, strings.Repeat("x", 20))
		hs = append(hs, p.SubmitAsync(ctx, pipeline.Entry{Type: "job.submit", ID: fmt.Sprint(i), Payload: []byte(pl)}))
	}
	for i := 0; i < 3; i++ {
		p.Flush(ctx)
	}
	if fmt.Sprint(ev.Batches) != "[1 1 1]" || log.Pending() != 3 {
		t.Fatalf("batches %v pending %d, want three single-entry batches", ev.Batches, log.Pending())
	}
	for log.CommitNext() {
	}
	for i, h := range hs {
		if o := h.Outcome(); o.Status != pipeline.StatusCommitted {
			t.Fatalf("%d: %s", i, o)
		}
	}
}
