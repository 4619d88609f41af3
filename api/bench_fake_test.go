package api

import (
	"context"
	"sync"
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

// BenchmarkWriteStreamParallel_FakeBackend is BenchmarkSubmitParallel's
// load on one Write stream: 16 goroutines share the stream, each waiting
// for its own answer.
func BenchmarkWriteStreamParallel_FakeBackend(b *testing.B) {
	c := serveFakeB(b)
	ws, err := c.Write(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	var mu sync.Mutex
	var seq uint64
	waiting := map[uint64]chan *writv1.WriteResponse{}
	go func() {
		for {
			r, err := ws.Recv()
			if err != nil {
				return
			}
			mu.Lock()
			ch := waiting[r.GetSeq()]
			delete(waiting, r.GetSeq())
			mu.Unlock()
			ch <- r
		}
	}()
	var sendMu sync.Mutex
	b.ReportAllocs()
	b.SetParallelism(16)
	b.RunParallel(func(pb *testing.PB) {
		ch := make(chan *writv1.WriteResponse, 1)
		for pb.Next() {
			mu.Lock()
			seq++
			s := seq
			waiting[s] = ch
			mu.Unlock()
			req := &writv1.WriteRequest{Seq: s, Call: &writv1.WriteRequest_Submit{Submit: &writv1.SubmitRequest{Entry: &writv1.Entry{
				Type: "job.submit", Id: "bench", Payload: []byte(`{"job_id":"j1","queue":"q","priority":1,"command":"x"}`)}}}}
			sendMu.Lock()
			err := ws.Send(req)
			sendMu.Unlock()
			if err != nil {
				b.Error(err)
				return
			}
			if r := <-ch; r.GetSubmit() == nil {
				b.Errorf("answer %v", r)
				return
			}
		}
	})
}
