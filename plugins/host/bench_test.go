package host_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/writ-dev/writ/kv"
	"github.com/writ-dev/writ/pipeline"
	"github.com/writ-dev/writ/plugins/host"
)

// BenchmarkEvaluate measures per-entry evaluation cost through a real
// plugin process (the test binary re-executed as a plugin, mTLS on), one
// Evaluate call per batch.
//
// The "ok" plugin's test.put handler does encoding/json work of its own
// (DecodePayload into a struct, SetResult of a map), about half of the
// plugin's CPU per entry; BenchmarkEvaluate_NopHandler measures the same
// batches without it.
func BenchmarkEvaluate(b *testing.B) { benchmarkEvaluate(b, "ok") }

// BenchmarkEvaluate_NopHandler is BenchmarkEvaluate with a handler that does
// nothing (an empty effect per entry): the cost of the process boundary
// (host encoding, gRPC over mTLS, the SDK's serve loop and batch codec,
// host decoding) alone.
func BenchmarkEvaluate_NopHandler(b *testing.B) { benchmarkEvaluate(b, "nop") }

func benchmarkEvaluate(b *testing.B, mode string) {
	cfg := config(b, mode)
	cfg.LogOutput = nil
	h, err := host.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close()
	for _, n := range []int{1, 64} {
		items := make([]pipeline.EvalItem, n)
		for k := range items {
			key := fmt.Sprintf("job/j-%04d", k)
			items[k] = putItem(fmt.Sprintf("req-%d", k), key, `{"queue":"default","priority":5,"state":"PENDING"}`,
				kv.Record{Key: key, Value: []byte(`{"queue":"default","priority":4,"state":"PENDING"}`), Rev: uint64(k + 1)})
		}
		b.Run(fmt.Sprintf("batch=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			ctx := context.Background()
			pid := h.Status()[0].PID
			start, cpu0, pcpu0 := time.Now(), cpuTime(pid), procCPU(pid)
			for b.Loop() {
				res, err := h.Evaluate(ctx, items)
				if err != nil || res[0].Err != nil || res[n-1].Err != nil {
					b.Fatalf("%v %+v %+v", err, res[0].Err, res[n-1].Err)
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
