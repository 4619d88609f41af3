package handler_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/writ-dev/writ/examples/jobs/handler"
	"github.com/writ-dev/writ/kv"
	"github.com/writ-dev/writ/plugins/sdk"
)

// BenchmarkSubmitInProcess is the handler's own share of the per-entry cost
// (payload decoding and validation, rules, document encoding), without the
// process boundary; compare with plugins/host BenchmarkJobsEvaluate.
func BenchmarkSubmitInProcess(b *testing.B) {
	p := handler.Plugin()
	queue := []byte(`{"name":"default","state":"ACTIVE"}`)
	items := make([]sdk.Item, 64)
	for k := range items {
		id := fmt.Sprintf("j-%04d", k)
		items[k] = sdk.Item{Type: "job.submit", ID: "req-" + id,
			Payload: []byte(fmt.Sprintf(`{"job_id":%q,"queue":"default","priority":5,"command":"make test","cpu_millis":500}`, id)),
			State:   []kv.Record{{Key: "job/" + id}, {Key: "queue/default", Value: queue, Rev: 7}, {Key: "_m/job/" + id}}}
	}
	b.ReportAllocs()
	ctx := context.Background()
	for b.Loop() {
		res := p.Evaluate(ctx, items)
		if res[0].Err != nil {
			b.Fatal(res[0].Err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(items)), "ns/entry")
}
