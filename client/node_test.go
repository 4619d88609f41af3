package client_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/writ-dev/writ/api/writv1"
	"github.com/writ-dev/writ/client"
	"github.com/writ-dev/writ/examples/jobs/jobsgen"
)

// TestEveryCallAgainstARealNode drives each client call against one real
// writd with its real plugin: typed submits, a rejection naming its field,
// a retry of a committed ID, reads, a fact, a receipt, lookups and a watch.
func TestEveryCallAgainstARealNode(t *testing.T) {
	t.Parallel()
	c := startCluster(t, "127.0.44.7")
	cl, err := client.New(client.Config{Endpoints: []string{c.nodes[0].api()}})
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
	o, err := client.SubmitTyped(ctx, cl, jobsgen.JobSubmit{JobID: "j1", Queue: "q1", Priority: 1, Command: "run"})
	if err != nil || o.Status != client.Committed || o.Index == 0 || !strings.HasPrefix(o.RequestID, client.RequestIDPrefix) || o.ServedBy != "n1" {
		t.Fatalf("submit: %+v %v", o, err)
	}
	again, err := client.SubmitTyped(ctx, cl, jobsgen.JobSubmit{JobID: "j1", Queue: "q1", Priority: 1, Command: "run"}, client.WithID(o.RequestID))
	if err != nil || again.Status != client.Committed || again.Index != o.Index {
		t.Fatalf("retry of %s: %+v %v, want COMMITTED at %d", o.RequestID, again, err, o.Index)
	}
	bad, err := client.SubmitTyped(ctx, cl, jobsgen.JobSubmit{JobID: "j2", Queue: "q1", Priority: 5000, Command: "run"})
	if got, ok := client.OutcomeOf(err); !ok || got.Status != client.Rejected || bad.Status != client.Rejected || bad.Field != "priority" {
		t.Fatalf("priority 5000: %+v %v, want REJECTED naming priority", bad, err)
	}
	rec, err := cl.Get(ctx, "job/j1")
	if err != nil || !strings.Contains(string(rec.Value), `"PENDING"`) {
		t.Fatalf("get job/j1: %+v %v", rec, err)
	}
	if _, err := cl.Get(ctx, "job/none", client.Serializable()); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("get of a missing key: %v", err)
	}
	if recs, err := cl.List(ctx, "job/"); err != nil || len(recs) != 1 {
		t.Fatalf("list job/: %v %v", recs, err)
	}
	d, err := client.DeliverTyped(ctx, cl, jobsgen.JobDispatch{DispatchID: "d1", Scheduler: "s", ItemsField: []jobsgen.JobAssign{{JobID: "j1", WorkerID: "w1"}}})
	if err != nil || len(d.ItemIDs) != 1 {
		t.Fatalf("deliver: %+v %v", d, err)
	}
	f, err := client.ReportTyped(ctx, cl, jobsgen.JobStateReport{ReportID: "r1", JobID: "j1", State: "RUNNING", Seq: 1, WorkerID: "w1"})
	if err != nil || f.ID == "" || f.NodeID != "n1" {
		t.Fatalf("report: %+v %v", f, err)
	}
	c.waitFor("the fact committed", func() bool {
		o, err := cl.Outcome(ctx, f.OutcomeID)
		return err == nil && o.Known && o.Status == client.Committed
	})
	if o, err := cl.Outcome(ctx, "r-never-sent"); err != nil || o.Known {
		t.Fatalf("outcome of an unknown ID: %+v %v", o, err)
	}
	w, err := cl.Watch(ctx, client.WatchOptions{FromIndex: 1, Types: []string{jobsgen.NameJobStateReport}})
	if err != nil {
		t.Fatal(err)
	}
	ev, err := w.Recv()
	w.Close()
	if err != nil || ev.Key != "j1" || ev.Status != "apply" {
		t.Fatalf("watch: %+v %v", ev, err)
	}
	if st, err := cl.Status(ctx); err != nil || !st.IsLeader {
		t.Fatalf("status: %v %v", st, err)
	}
	if m, err := cl.Members(ctx); err != nil || len(m.Members) != 1 {
		t.Fatalf("members: %v %v", m, err)
	}
	if p, err := cl.Raw().Plugins(ctx, &writv1.PluginsRequest{}); err != nil || len(p.Plugins) != 1 {
		t.Fatalf("plugins through Raw: %v %v", p, err)
	}
}
