package pipeline_test

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/writ-dev/writ/examples/jobs/jobsgen"
	"github.com/writ-dev/writ/pipeline"
	"github.com/writ-dev/writ/pipeline/pipelinetest"
)

type report struct {
	state string
	seq   uint64
}

// genLegalPath draws a legal sequence of worker reports for a dispatched
// job: optionally RUNNING, then optionally a terminal state, with
// increasing sequence numbers.
func genLegalPath(t *rapid.T) []report {
	var path []report
	seq := uint64(0)
	if rapid.Bool().Draw(t, "running") {
		seq += rapid.Uint64Range(1, 3).Draw(t, "gap1")
		path = append(path, report{"RUNNING", seq})
	}
	if len(path) == 0 || rapid.Bool().Draw(t, "finish") {
		seq += rapid.Uint64Range(1, 3).Draw(t, "gap2")
		path = append(path, report{rapid.SampledFrom([]string{"COMPLETED", "FAILED"}).Draw(t, "end"), seq})
	}
	return path
}

// deliveries reorders and duplicates a path (what the network does).
func deliveries(t *rapid.T, path []report) []report {
	var out []report
	for _, r := range path {
		for n := rapid.IntRange(1, 3).Draw(t, "copies"); n > 0; n-- {
			out = append(out, r)
		}
	}
	perm := rapid.Permutation(out).Draw(t, "order")
	return perm
}

// TestGuardPropertyFacts checks the runtime guard over ≥10,000 random
// sequences of job.state_report facts with duplicates, reorderings and
// replays: the final state equals the last state of the legal ordered
// sequence, and no terminal state is ever left, even under arbitrary
// (illegal) reports.
func TestGuardPropertyFacts(t *testing.T) {
	job, _ := jobsgen.Catalog().Machine("job")
	apply := func(cur pipeline.MachineRecord, r report) pipeline.MachineRecord {
		v, _ := pipeline.Decide(job, cur, true, r.state, r.seq, true, pipeline.VerdictQuarantine)
		if v == pipeline.VerdictApply {
			return pipeline.MachineRecord{State: r.state, Order: r.seq, HasOrder: true}
		}
		return cur
	}
	start := pipeline.MachineRecord{State: "DISPATCHED"}
	defer atLeastChecks(t, 10000)()
	rapid.Check(t, func(t *rapid.T) {
		path := genLegalPath(t)
		ds := deliveries(t, path)
		cur := start
		for _, r := range ds {
			cur = apply(cur, r)
		}
		if want := path[len(path)-1].state; cur.State != want {
			t.Fatalf("path %v delivered as %v: final %s, want %s", path, ds, cur.State, want)
		}
		// replay: applying everything again changes nothing
		again := cur
		for _, r := range ds {
			again = apply(again, r)
		}
		if again != cur {
			t.Fatalf("replay changed state %v → %v", cur, again)
		}
		// arbitrary reports never leave a terminal state
		wild := rapid.SliceOfN(rapid.Custom(func(t *rapid.T) report {
			return report{rapid.SampledFrom([]string{"RUNNING", "COMPLETED", "FAILED"}).Draw(t, "s"), rapid.Uint64Range(0, 20).Draw(t, "q")}
		}), 0, 12).Draw(t, "wild")
		c := start
		for _, r := range wild {
			next := apply(c, r)
			if job.IsTerminal(c.State) && next.State != c.State {
				t.Fatalf("terminal %s left for %s by %v", c.State, next.State, r)
			}
			c = next
		}
	})
}

// TestPipelinePropertyFacts_FakeLog runs the same property end to end
// through the real pipeline (outbox file, evaluation, guard, apply-time
// checker, dedup) over the fake log, one job per case.
func TestPipelinePropertyFacts_FakeLog(t *testing.T) {
	h, err := pipelinetest.NewHarness(t.TempDir(), jobsgen.Catalog())
	if err != nil {
		t.Fatal(err)
	}
	defer h.P.Stop()
	ctx := context.Background()
	n := 0
	defer atLeastChecks(t, 500)()
	rapid.Check(t, func(t *rapid.T) {
		n++
		job := fmt.Sprintf("j%d", n)
		hd := h.P.SubmitAsync(ctx, pipeline.Entry{Type: "job.submit", ID: "s-" + job,
			Payload: []byte(fmt.Sprintf(`{"job_id":"%s","queue":"q","priority":1,"command":"x"}`, job))})
		h.Drain()
		if o := hd.Outcome(); o.Status != pipeline.StatusCommitted {
			t.Fatalf("submit: %s", o)
		}
		h.P.Deliver(ctx, pipeline.Entry{Type: "job.dispatch",
			Payload: []byte(fmt.Sprintf(`{"dispatch_id":"d-%s","scheduler":"s","items":[{"job_id":"%s","worker_id":"w-%s"}]}`, job, job, job))})
		h.Drain()
		path := genLegalPath(t)
		for i, r := range deliveries(t, path) {
			// duplicates of one report share its report ID (dedup by fact ID)
			a := h.P.Report(ctx, pipeline.Entry{Type: "job.state_report", Payload: []byte(fmt.Sprintf(
				`{"report_id":"%s-%d-%s","job_id":"%s","state":"%s","seq":%d,"worker_id":"w-%s"}`, job, r.seq, strings.ToLower(r.state), job, r.state, r.seq, job))})
			if !a.Received {
				t.Fatalf("report %d: %+v", i, a)
			}
			if rapid.Bool().Draw(t, "drain") {
				h.Drain()
			}
		}
		h.Drain()
		rec, ok, _ := h.Log.Get(ctx, "_m/job/"+job, false)
		want := path[len(path)-1]
		if got := fmt.Sprintf(`{"state":"%s","scope":"w-%s","order":%d}`, want.state, job, want.seq); !ok || string(rec.Value) != got {
			t.Fatalf("path %v: record %s, want %s", path, rec.Value, got)
		}
		if h.P.Outbox().Depth != 0 {
			t.Fatalf("outbox not drained: %+v", h.P.Outbox())
		}
	})
	if len(h.Violations) > 0 {
		t.Fatal(h.Violations)
	}
}

// atLeastChecks raises rapid's case count for one test unless -rapid.checks
// was given; the returned func restores it.
func atLeastChecks(t *testing.T, n int) func() {
	f := flag.Lookup("rapid.checks")
	if f == nil || f.Value.String() != f.DefValue {
		return func() {}
	}
	if err := f.Value.Set(fmt.Sprint(n)); err != nil {
		t.Fatal(err)
	}
	return func() { f.Value.Set(f.DefValue) }
}
