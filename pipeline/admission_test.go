package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/writ-dev/writ/pipeline"
	"github.com/writ-dev/writ/pipeline/pipelinetest"
)

// Beyond max_inflight a request is answered UNAVAILABLE "overloaded" at
// once and never reaches the log; beyond the outbox bound a fact is not
// received (nothing written), and is received once the outbox drained.
func TestAdmissionBoundsRequestsAndOutbox_FakeLog(t *testing.T) {
	log := pipelinetest.NewFakeLog()
	p := startOnFakeLog(t, log, pipeline.Config{Catalog: pipelinetest.FakeCatalog(), Evaluator: pipelinetest.NewFakeEvaluator(), Manual: true,
		MaxInflight: 2, OutboxMaxEntries: 2})
	ctx := context.Background()
	var wg sync.WaitGroup
	outs := make([]pipeline.Outcome, 2)
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			outs[i] = p.Submit(ctx, pipeline.Entry{Type: "job.submit", ID: fmt.Sprintf("r%d", i), Payload: []byte(fmt.Sprintf(`{"job_id":"j%d","queue":"q%d"}`, i, i))})
		}()
	}
	deadline := time.Now().Add(5 * time.Second)
	for p.Admission().Inflight != 2 {
		if time.Now().After(deadline) {
			t.Fatalf("admission: %+v, want 2 in flight", p.Admission())
		}
		time.Sleep(time.Millisecond)
	}
	o := p.Submit(ctx, pipeline.Entry{Type: "job.submit", ID: "over", Payload: []byte(`{"job_id":"jx","queue":"qx"}`)})
	if o.Status != pipeline.StatusUnavailable || !strings.HasPrefix(o.Reason, "overloaded: ") || !strings.Contains(o.Reason, "retry after") {
		t.Fatalf("third request: %s", o)
	}
	// A request is counted in flight when it is admitted, a moment before
	// it is queued: drive the pipeline until both have answered, not once
	// (a single Flush could run before the second was queued, which then
	// waited forever in Manual mode).
	answered := make(chan struct{})
	go func() { wg.Wait(); close(answered) }()
	deadline = time.Now().Add(30 * time.Second)
	for done := false; !done; {
		p.Flush(ctx)
		for log.CommitNext() {
		}
		select {
		case <-answered:
			done = true
		case <-time.After(time.Millisecond):
			if time.Now().After(deadline) {
				t.Fatalf("admitted requests not answered within 30s: admission %+v", p.Admission())
			}
		}
	}
	for i, o := range outs {
		if o.Status != pipeline.StatusCommitted {
			t.Fatalf("admitted request %d: %s", i, o)
		}
	}
	if _, ok := log.Outcome("req:over"); ok {
		t.Fatal("the refused request reached the log")
	}
	if st := p.Admission(); st.Inflight != 0 || st.RefusedRequests != 1 {
		t.Fatalf("admission after: %+v", st)
	}

	fact := func(id string) pipeline.Ack {
		return p.Report(ctx, pipeline.Entry{Type: "job.state_report", Payload: []byte(fmt.Sprintf(`{"report_id":%q,"job_id":"j0","state":"RUNNING","seq":1}`, id))})
	}
	for _, id := range []string{"f1", "f2"} {
		if a := fact(id); !a.Received {
			t.Fatalf("fact %s: %+v", id, a)
		}
	}
	a := fact("f3")
	if a.Received || !a.Overloaded || a.Status != pipeline.StatusUnavailable || !strings.HasPrefix(a.Reason, "overloaded: fact outbox full") {
		t.Fatalf("fact beyond the bound: %+v", a)
	}
	if ob := p.Outbox(); ob.Depth != 2 {
		t.Fatalf("outbox depth %d after a refusal, want 2", ob.Depth)
	}
	if a := fact("f1"); !a.Received {
		t.Fatalf("a retained fact again is received (no new entry): %+v", a)
	}
	p.Flush(ctx)
	for log.CommitNext() {
	}
	p.Flush(ctx)
	if a := fact("f3"); !a.Received {
		t.Fatalf("fact after the outbox drained: %+v (outbox %d)", a, p.Outbox().Depth)
	}
	if st := p.Admission(); st.RefusedFacts != 1 || st.OutboxMaxEntries != 2 {
		t.Fatalf("admission: %+v", st)
	}
}

func TestOutboxBoundedBytes(t *testing.T) {
	ob, _, err := pipeline.OpenOutbox(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer ob.Close()
	big := pipeline.OutboxItem{ID: "a", Type: "t", Payload: make([]byte, 600), Received: time.Now()}
	if err := ob.AddBatchBounded([]pipeline.OutboxItem{big}, 0, 1000); err != nil {
		t.Fatal(err)
	}
	big.ID = "b"
	err = ob.AddBatchBounded([]pipeline.OutboxItem{big}, 0, 1000)
	var full *pipeline.OutboxFullError
	if !errors.Is(err, pipeline.ErrOutboxFull) || !errors.As(err, &full) || full.Reason != "outbox_bytes" {
		t.Fatalf("beyond the byte bound: %v", err)
	}
	if n, b := ob.Usage(); n != 1 || b != 600 {
		t.Fatalf("usage %d %d", n, b)
	}
	if err := ob.Done("a"); err != nil {
		t.Fatal(err)
	}
	if err := ob.AddBatchBounded([]pipeline.OutboxItem{big}, 0, 1000); err != nil {
		t.Fatalf("after Done: %v", err)
	}
}
