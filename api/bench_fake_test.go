package api

import (
	"context"
	"testing"

	"github.com/writ-dev/writ/api/writv1"
)

// BenchmarkSubmit_FakeBackend measures the API layer alone: a gRPC Submit
// over loopback into a backend that commits instantly.
func BenchmarkSubmit_FakeBackend(b *testing.B) {
	c := serveFakeB(b)
	req := &writv1.SubmitRequest{Entry: &writv1.Entry{Type: "job.submit", Id: "bench", Payload: []byte(`{"job_id":"j1","queue":"q","priority":1,"command":"x"}`)}}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := c.Submit(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSubmitParallel_FakeBackend is the same with concurrent clients
// on one connection.
func BenchmarkSubmitParallel_FakeBackend(b *testing.B) {
	c := serveFakeB(b)
	req := &writv1.SubmitRequest{Entry: &writv1.Entry{Type: "job.submit", Id: "bench", Payload: []byte(`{"job_id":"j1","queue":"q","priority":1,"command":"x"}`)}}
	b.ReportAllocs()
	b.SetParallelism(16)
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			if _, err := c.Submit(ctx, req); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
