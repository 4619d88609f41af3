package client_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/stats"

	"github.com/writ-dev/writ/api/writv1"
	"github.com/writ-dev/writ/client"
	"github.com/writ-dev/writ/examples/jobs/jobsgen"
)

// wireLog counts what went over the client's connections: calls opened
// per method, and the Write stream's messages.
type wireLog struct {
	mu      sync.Mutex
	opened  map[string]int // full method -> calls or streams opened
	written int            // WriteRequests sent
	drained int            // drained WriteResponses received
}

type methodKey struct{}

func (l *wireLog) TagRPC(ctx context.Context, i *stats.RPCTagInfo) context.Context {
	l.mu.Lock()
	l.opened[i.FullMethodName]++
	l.mu.Unlock()
	return context.WithValue(ctx, methodKey{}, i.FullMethodName)
}

func (l *wireLog) HandleRPC(_ context.Context, s stats.RPCStats) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch p := s.(type) {
	case *stats.OutPayload:
		if _, ok := p.Payload.(*writv1.WriteRequest); ok {
			l.written++
		}
	case *stats.InPayload:
		if r, ok := p.Payload.(*writv1.WriteResponse); ok && r.GetDrained() {
			l.drained++
		}
	}
}

func (l *wireLog) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }
func (l *wireLog) HandleConn(context.Context, stats.ConnStats)                       {}

func (l *wireLog) counts() (unaryWrites, streams, written, drained int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.opened[writv1.Writ_Submit_FullMethodName] + l.opened[writv1.Writ_Report_FullMethodName] + l.opened[writv1.Writ_Deliver_FullMethodName],
		l.opened[writv1.Writ_Write_FullMethodName], l.written, l.drained
}

// TestStreamCallsAgainstARealNode sends submits, a rejection, a retry, a
// receipt and a fact over the Write stream to one real writd, and checks
// they got the answers the unary calls get, and that none went unary.
func TestStreamCallsAgainstARealNode(t *testing.T) {
	t.Parallel()
	c := startCluster(t, "127.0.44.11")
	wl := &wireLog{opened: map[string]int{}}
	cl, err := client.New(client.Config{Endpoints: []string{c.nodes[0].api()}, Stream: true,
		DialOptions: []grpc.DialOption{grpc.WithStatsHandler(wl)}})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := client.SubmitTyped(ctx, cl, jobsgen.QueueControl{Queue: "q1", Action: "create"}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.SubmitTyped(ctx, cl, jobsgen.WorkerJoin{WorkerID: "w1", Capacity: 2}); err != nil {
		t.Fatal(err)
	}
	o, err := client.SubmitTyped(ctx, cl, jobsgen.JobSubmit{JobID: "j1", Queue: "q1", Priority: 1, Command: strings.Repeat("x", 4096)})
	if err != nil || o.Status != client.Committed || o.Index == 0 || o.ServedBy != "n1" {
		t.Fatalf("submit: %+v %v", o, err)
	}
	again, err := client.SubmitTyped(ctx, cl, jobsgen.JobSubmit{JobID: "j1", Queue: "q1", Priority: 1, Command: strings.Repeat("x", 4096)}, client.WithID(o.RequestID))
	if err != nil || again.Index != o.Index {
		t.Fatalf("retry of %s: %+v %v, want COMMITTED at %d", o.RequestID, again, err, o.Index)
	}
	bad, err := client.SubmitTyped(ctx, cl, jobsgen.JobSubmit{JobID: "j2", Queue: "q1", Priority: 5000, Command: "run"})
	if got, ok := client.OutcomeOf(err); !ok || got.Status != client.Rejected || bad.Field != "priority" {
		t.Fatalf("priority 5000: %+v %v, want REJECTED naming priority", bad, err)
	}
	if _, err := cl.Submit(ctx, "job.state_report", []byte(`{}`)); err == nil {
		t.Fatal("a fact type submitted as a request was accepted")
	}
	d, err := client.DeliverTyped(ctx, cl, jobsgen.JobDispatch{DispatchID: "d1", Scheduler: "s", ItemsField: []jobsgen.JobAssign{{JobID: "j1", WorkerID: "w1"}}})
	if err != nil || len(d.ItemIDs) != 1 {
		t.Fatalf("deliver: %+v %v", d, err)
	}
	f, err := client.ReportTyped(ctx, cl, jobsgen.JobStateReport{ReportID: "r1", JobID: "j1", State: "RUNNING", Seq: 1, WorkerID: "w1"})
	if err != nil || f.NodeID != "n1" {
		t.Fatalf("report: %+v %v", f, err)
	}
	c.waitFor("the fact committed", func() bool {
		o, err := cl.Outcome(ctx, f.OutcomeID)
		return err == nil && o.Known && o.Status == client.Committed
	})
	// Raw's writes take the stream too
	if _, err := cl.Raw().Submit(ctx, &writv1.SubmitRequest{Entry: &writv1.Entry{Type: jobsgen.NameJobSubmit, Id: client.NewRequestID(),
		Payload: []byte(`{"job_id":"j3","queue":"q1","priority":1,"command":"run"}`)}}); err != nil {
		t.Fatalf("Raw submit: %v", err)
	}
	unary, streams, written, _ := wl.counts()
	if unary != 0 || streams != 1 || written != 9 {
		t.Fatalf("unary writes %d, Write streams %d, calls on them %d: want 0, 1 and 9", unary, streams, written)
	}
}

// TestStreamGracefulStopHandsOverUnanswered stops the leader gracefully
// (SIGINT) while 16 callers submit over Write streams. Its streams answer
// the calls they took and end with a drained message; the client sends
// the calls left unanswered to another node. Every submit must commit,
// and each job must be applied exactly once, under its request ID.
func TestStreamGracefulStopHandsOverUnanswered(t *testing.T) {
	t.Parallel()
	c := startCluster(t, "127.0.44.12", "127.0.44.13", "127.0.44.14")
	a := c.leader()
	eps := []string{a.api()}
	var others []*node
	for _, n := range c.nodes {
		if n != a {
			eps = append(eps, n.api())
			others = append(others, n)
		}
	}
	wl := &wireLog{opened: map[string]int{}}
	cl, err := client.New(client.Config{Endpoints: eps, Stream: true, RequestTimeout: 10 * time.Second,
		DialOptions: []grpc.DialOption{grpc.WithStatsHandler(wl)}})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if _, err := client.SubmitTyped(ctx, cl, jobsgen.QueueControl{Queue: "q1", Action: "create"}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	ids := map[string]string{} // job -> request ID
	var failed []string
	committed := make(chan struct{}, 1<<16)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				job := fmt.Sprintf("w%d-j%d", w, i)
				o, err := client.SubmitTyped(ctx, cl, jobsgen.JobSubmit{JobID: job, Queue: "q1", Priority: 1, Command: "run"})
				mu.Lock()
				if err != nil {
					failed = append(failed, fmt.Sprintf("%s: %v", job, err))
				} else {
					ids[job] = o.RequestID
				}
				mu.Unlock()
				committed <- struct{}{}
			}
		}()
	}
	for range 200 {
		<-committed
	}
	c.signal(a, syscall.SIGINT)
	select {
	case <-a.done:
	case <-time.After(30 * time.Second):
		t.Fatal("the leader did not stop within 30s of SIGINT")
	}
	a.cmd = nil
	for range 300 {
		<-committed
	}
	close(stop)
	wg.Wait()
	if len(failed) > 0 {
		t.Fatalf("%d submits did not commit across the leader's graceful stop, first: %s", len(failed), failed[0])
	}
	_, _, _, drained := wl.counts()
	if drained == 0 {
		t.Fatal("the stopping leader ended its Write stream without a drained message")
	}
	// each job applied once, under its ID, on both nodes left
	marker, err := client.SubmitTyped(ctx, cl, jobsgen.JobSubmit{JobID: "marker", Queue: "q1", Priority: 1, Command: "run"})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range others {
		s, err := n.w.Watch(ctx, &writv1.WatchRequest{FromIndex: 1, Types: []string{jobsgen.NameJobSubmit}})
		if err != nil {
			t.Fatal(err)
		}
		applied := map[string][]string{}
		for {
			ev, err := s.Recv()
			if err != nil {
				t.Fatalf("%s watch: %v", n.name, err)
			}
			if ev.Status == "apply" {
				applied[ev.Key] = append(applied[ev.Key], ev.Id)
			}
			if ev.Index >= marker.Index {
				break
			}
		}
		for job, id := range ids {
			if got := applied[job]; len(got) != 1 || got[0] != "req:"+id {
				t.Errorf("%s: job %s applied as %v, want once as req:%s", n.name, job, got, id)
			}
		}
	}
	t.Logf("%d submits committed, %d drained messages", len(ids), drained)
}
