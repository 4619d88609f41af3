package host_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/writ-dev/writ/examples/jobs/jobsgen"
	"github.com/writ-dev/writ/kv"
	"github.com/writ-dev/writ/pipeline"
	"github.com/writ-dev/writ/plugins/host"
)

var (
	jobsOnce   sync.Once
	jobsPlugin host.PluginConfig
	jobsErr    error
	jobsDir    string
)

// buildJobsPlugin builds the real writ-jobs plugin binary (once per test
// binary) into a temp dir removed by TestMain.
func buildJobsPlugin(t testing.TB) host.PluginConfig {
	t.Helper()
	jobsOnce.Do(func() {
		jobsDir, jobsErr = os.MkdirTemp("", "writ-jobs-plugin-")
		if jobsErr != nil {
			return
		}
		bin := filepath.Join(jobsDir, "writ-jobs")
		cmd := exec.Command("go", "build", "-o", bin, "github.com/writ-dev/writ/examples/jobs/cmd/writ-jobs")
		if out, err := cmd.CombinedOutput(); err != nil {
			jobsErr = fmt.Errorf("go build writ-jobs: %v\n%s", err, out)
			return
		}
		b, err := os.ReadFile(bin)
		if err != nil {
			jobsErr = err
			return
		}
		s := sha256.Sum256(b)
		jobsPlugin = host.PluginConfig{Path: bin, SHA256: hex.EncodeToString(s[:])}
	})
	if jobsErr != nil {
		t.Fatal(jobsErr)
	}
	return jobsPlugin
}

func removeJobsPlugin() {
	if jobsDir != "" {
		_ = os.RemoveAll(jobsDir)
	}
}

func jobsHost(t testing.TB) *host.Host {
	t.Helper()
	h, err := host.New(host.Config{Catalog: jobsgen.Catalog(), Plugins: []host.PluginConfig{buildJobsPlugin(t)}, LogOutput: logWriter{t}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

func TestJobsPluginProcess(t *testing.T) {
	t.Parallel()
	h := jobsHost(t)
	st := h.Status()[0]
	if st.Name != "writ-jobs" || !st.Healthy || len(st.Types) != 11 {
		t.Fatalf("status %+v", st)
	}
	queue := []byte(`{"name":"q1","state":"ACTIVE"}`)
	items := []pipeline.EvalItem{
		{Type: "queue.control", ID: "a", Payload: []byte(`{"queue":"q2","action":"create"}`), State: []kv.Record{{Key: "queue/q2"}, {Key: "_m/queue/q2"}}},
		{Type: "job.submit", ID: "b", Payload: []byte(`{"job_id":"j1","queue":"q1","priority":3,"command":"true"}`),
			State: []kv.Record{{Key: "job/j1"}, {Key: "queue/q1", Value: queue, Rev: 5}, {Key: "_m/job/j1"}}},
		{Type: "job.submit", ID: "c", Payload: []byte(`{"job_id":"j2","queue":"nope","priority":3,"command":"true"}`),
			State: []kv.Record{{Key: "job/j2"}, {Key: "queue/nope"}, {Key: "_m/job/j2"}}},
		{Type: "job.submit", ID: "d", Payload: []byte(`{"job_id":"j3","queue":"q1","priority":3000,"command":"true"}`)},
		{Type: "job.assign", ID: "e", Payload: []byte(`{"job_id":"j9","worker_id":"w9"}`)},
	}
	res, err := h.Evaluate(context.Background(), items)
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Err != nil || len(res[0].Effect.Writes) != 1 || res[0].Effect.Writes[0].Key != "queue/q2" {
		t.Errorf("queue create: %+v %v", res[0], res[0].Err)
	}
	if res[1].Err != nil || len(res[1].Effect.Writes) != 1 || res[1].Effect.Writes[0].IfRev != 0 || string(res[1].Result) != `{"job_id":"j1","state":"PENDING"}` {
		t.Errorf("submit: %+v %v", res[1], res[1].Err)
	}
	if res[2].Err == nil || res[2].Err.Kind != pipeline.EvalRule || !strings.Contains(res[2].Err.Msg, `queue "nope" does not exist`) {
		t.Errorf("submit to a missing queue: %+v", res[2].Err)
	}
	if res[3].Err == nil || res[3].Err.Kind != pipeline.EvalValidation || !strings.Contains(res[3].Err.Msg, "priority") {
		t.Errorf("invalid priority: %+v", res[3].Err)
	}
	if got := fmt.Sprint(res[4].NeedKeys); got != "[job/j9 worker/w9]" {
		t.Errorf("assign without state: NeedKeys %s (%+v)", got, res[4])
	}
}

func TestJobsPluginWrongSchemaRefused(t *testing.T) {
	t.Parallel()
	pc := buildJobsPlugin(t)
	cat := newTestCatalog() // another schema: other fingerprint, other types
	_, err := host.New(host.Config{Catalog: cat, Plugins: []host.PluginConfig{pc}, LogOutput: logWriter{t}})
	if err == nil || !strings.Contains(err.Error(), `"writ-jobs"`) || !strings.Contains(err.Error(), jobsgen.Fingerprint) {
		t.Fatalf("want a refusal naming writ-jobs and its fingerprint, got %v", err)
	}
}

// BenchmarkJobsEvaluate measures per-entry evaluation of job.submit through
// the real writ-jobs plugin process (generated payload decoding and
// validation, domain rules, JSON documents, mTLS gRPC). With
// WRITTEST_PLUGIN_CPUPROFILE set, the test binary serves the same handler
// instead (only it writes that profile).
func BenchmarkJobsEvaluate(b *testing.B) {
	pc := host.PluginConfig{}
	if f := os.Getenv("WRITTEST_PLUGIN_CPUPROFILE"); f != "" {
		pc.Path, pc.SHA256 = selfPlugin(b)
		pc.Args = []string{pluginFlag + "jobs", cpuProfileFlag + f}
	} else {
		pc = buildJobsPlugin(b)
	}
	h, err := host.New(host.Config{Catalog: jobsgen.Catalog(), Plugins: []host.PluginConfig{pc}})
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close()
	queue := []byte(`{"name":"default","state":"ACTIVE"}`)
	for _, n := range []int{1, 64} {
		items := make([]pipeline.EvalItem, n)
		for k := range items {
			id := fmt.Sprintf("j-%04d", k)
			items[k] = pipeline.EvalItem{Type: "job.submit", ID: "req-" + id,
				Payload: []byte(fmt.Sprintf(`{"job_id":%q,"queue":"default","priority":5,"command":"make test","cpu_millis":500}`, id)),
				State:   []kv.Record{{Key: "job/" + id}, {Key: "queue/default", Value: queue, Rev: 7}, {Key: "_m/job/" + id}}}
		}
		b.Run(fmt.Sprintf("batch=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			ctx := context.Background()
			pid := h.Status()[0].PID
			start, cpu0, pcpu0 := time.Now(), cpuTime(pid), procCPU(pid)
			for b.Loop() {
				res, err := h.Evaluate(ctx, items)
				if err != nil || res[0].Err != nil {
					b.Fatalf("%v %+v", err, res[0].Err)
				}
			}
			entries := float64(b.N * n)
			b.ReportMetric(float64(time.Since(start).Nanoseconds())/entries, "ns/entry")
			// Both processes, then the plugin alone.
			b.ReportMetric(float64((cpuTime(pid)-cpu0).Nanoseconds())/entries, "cpu-ns/entry")
			b.ReportMetric(float64((procCPU(pid)-pcpu0).Nanoseconds())/entries, "plugin-cpu-ns/entry")
		})
	}
}
