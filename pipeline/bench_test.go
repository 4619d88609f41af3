package pipeline_test

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/writ-dev/writ/examples/jobs/jobsgen"
	"github.com/writ-dev/writ/kv"
	"github.com/writ-dev/writ/pipeline"
	"github.com/writ-dev/writ/pipeline/pipelinetest"
)

// nopEvaluator is the cheapest possible handler, so the benchmark measures
// the pipeline, not the handler.
type nopEvaluator struct{ res []pipeline.EvalResult }

func (n *nopEvaluator) Evaluate(ctx context.Context, items []pipeline.EvalItem) ([]pipeline.EvalResult, error) {
	if cap(n.res) < len(items) {
		// an empty effect with a result: the handler accepts the entry
		// (an answer with nothing at all would decline it)
		n.res = make([]pipeline.EvalResult, len(items))
		for i := range n.res {
			n.res[i].Result = nopResult
		}
	}
	return n.res[:len(items)], nil
}

var _ pipeline.Evaluator = (*nopEvaluator)(nil)

var nopResult = []byte(`{}`)

func benchPipeline(b *testing.B) (*pipeline.Pipeline, *pipelinetest.FakeLog) {
	log := pipelinetest.NewFakeLog()
	p := startOnFakeLog(b, log, pipeline.Config{Catalog: jobsgen.Catalog(), Evaluator: &nopEvaluator{}, Manual: true, WatchRing: 1024, OutcomeCache: 1024})
	return p, log
}

// cpuTime is the process's user+system CPU time; benchmarks report it per
// op ("cpu-ns/op") because wall time is noisy on a shared machine.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
}

// BenchmarkSubmit_FakeLog: job.submit on fresh keys, one at a time.
func BenchmarkSubmit_FakeLog(b *testing.B) {
	p, log := benchPipeline(b)
	entries := make([]pipeline.Entry, b.N)
	for i := range entries {
		bin, _ := (&jobsgen.JobSubmit{JobID: "j" + strconv.Itoa(i), Queue: "q" + strconv.Itoa(i), Priority: 1, Command: "x"}).AppendBinary(nil)
		entries[i] = pipeline.Entry{Type: "job.submit", ID: strconv.Itoa(i), Format: pipeline.FormatBinary, Payload: bin}
	}
	submitEach(b, p, log, entries)
}

// BenchmarkSubmitJSON_FakeLog: as BenchmarkSubmit_FakeLog with JSON ingress
// (generated JSON decoder; the payload is handed to the handler as is).
func BenchmarkSubmitJSON_FakeLog(b *testing.B) {
	p, log := benchPipeline(b)
	entries := make([]pipeline.Entry, b.N)
	for i := range entries {
		js := `{"job_id":"j` + strconv.Itoa(i) + `","queue":"q` + strconv.Itoa(i) + `","priority":1,"command":"x"}`
		entries[i] = pipeline.Entry{Type: "job.submit", ID: strconv.Itoa(i), Payload: []byte(js)}
	}
	submitEach(b, p, log, entries)
}

// submitEach is the timed loop of the one-request-at-a-time benchmarks:
// submit, flush, commit, and the reply is there.
func submitEach(b *testing.B, p *pipeline.Pipeline, log *pipelinetest.FakeLog, entries []pipeline.Entry) {
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	defer reportCPU(b, cpuTime())
	for i := 0; i < b.N; i++ {
		h := p.SubmitAsync(ctx, entries[i])
		p.Flush(ctx)
		log.CommitNext()
		select {
		case <-h.Done():
		default:
			b.Fatal("no reply after commit")
		}
	}
}

// BenchmarkSubmitBatch64_FakeLog: 64 requests share one evaluation call and
// one proposal; reported per request.
func BenchmarkSubmitBatch64_FakeLog(b *testing.B) {
	p, log := benchPipeline(b)
	ctx := context.Background()
	n := b.N
	entries := make([]pipeline.Entry, n)
	for i := range entries {
		bin, _ := (&jobsgen.JobSubmit{JobID: "j" + strconv.Itoa(i), Queue: "q" + strconv.Itoa(i), Priority: 1, Command: "x"}).AppendBinary(nil)
		entries[i] = pipeline.Entry{Type: "job.submit", ID: strconv.Itoa(i), Format: pipeline.FormatBinary, Payload: bin}
	}
	hs := make([]*pipeline.Handle, 0, 64)
	b.ReportAllocs()
	b.ResetTimer()
	defer reportCPU(b, cpuTime())
	for i := 0; i < n; i += 64 {
		hs = hs[:0]
		for j := i; j < min(i+64, n); j++ {
			hs = append(hs, p.SubmitAsync(ctx, entries[j]))
		}
		p.Flush(ctx)
		log.CommitNext()
		for _, h := range hs {
			select {
			case <-h.Done():
			default:
				b.Fatal("no reply after commit")
			}
		}
	}
}

// BenchmarkFakeLogOnly: the in-memory log's own cost per single-command
// batch (propose + commit + apply), to subtract from the figures above.
func BenchmarkFakeLogOnly(b *testing.B) {
	log := pipelinetest.NewFakeLog()
	ctx := context.Background()
	cmds := make([][]kv.Command, b.N)
	for i := range cmds {
		k := "k" + strconv.Itoa(i)
		cmds[i] = []kv.Command{{ID: k, Effect: kv.Effect{Writes: []kv.Write{{Key: k, Value: []byte("v")}}}}}
	}
	b.ReportAllocs()
	b.ResetTimer()
	defer reportCPU(b, cpuTime())
	for i := 0; i < b.N; i++ {
		log.Propose(ctx, cmds[i])
		log.CommitNext()
	}
}

// BenchmarkReportParallel_RealOutbox: facts acknowledged after a real fsync
// into the outbox file, from many concurrent reporters (group commit).
func BenchmarkReportParallel_RealOutbox(b *testing.B) {
	p, _ := benchPipeline(b)
	ctx := context.Background()
	var n atomic.Int64
	b.SetParallelism(16)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := n.Add(1)
			js := `{"report_id":"u` + strconv.FormatInt(i, 10) + `","worker_id":"w1","seq":` + strconv.FormatInt(i, 10) + `,"cpu_millis":1,"mem_bytes":1}`
			if a := p.Report(ctx, pipeline.Entry{Type: "worker.usage", Payload: []byte(js)}); !a.Received {
				b.Fatalf("report: %+v", a)
			}
		}
	})
}

// BenchmarkRaftCluster3Submit_FakeEvaluator: requests end to end through the
// leader's pipeline over a real 3-node raftstore cluster (WAL fsync, gRPC
// transport on 127.0.4.x), 64 concurrent requesters on distinct keys, with a
// fake handler. Reports p50/p99 latency.
func BenchmarkRaftCluster3Submit_FakeEvaluator(b *testing.B) {
	c := newRaftCluster(b)
	p := c.nodes[c.leader(10*time.Second)].p
	ctx := context.Background()
	var n atomic.Int64
	var mu sync.Mutex
	lat := make([]time.Duration, 0, b.N)
	b.SetParallelism(32) // 64 requesters on 2 CPUs
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		var mine []time.Duration
		for pb.Next() {
			i := strconv.FormatInt(n.Add(1), 10)
			start := time.Now()
			o := p.Submit(ctx, pipeline.Entry{Type: "job.submit", ID: "b" + i,
				Payload: []byte(`{"job_id":"b` + i + `","queue":"q` + i + `","priority":1,"command":"x"}`)})
			mine = append(mine, time.Since(start))
			if o.Status != pipeline.StatusCommitted {
				b.Errorf("submit: %s", o)
				return
			}
		}
		mu.Lock()
		lat = append(lat, mine...)
		mu.Unlock()
	})
	b.StopTimer()
	if len(lat) > 0 {
		slices.Sort(lat)
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
	}
}
