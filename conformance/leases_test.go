package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/writ-dev/writ/pipeline"

	"github.com/writ-dev/writ/examples/leases/leasesgen"
	"github.com/writ-dev/writ/schema/ir"
)

// The second example domain, a lease/lock service whose machines cycle
// (FREE → HELD → EXPIRED → HELD …, ACTIVE ⇄ LOST), runs through the same
// static and property tiers as jobs: the suite must not assume the jobs
// schema anywhere. The cluster tier needs a writd that runs a schema other
// than the embedded jobs one, so it is not selected here.

const leasesSchema = "../examples/leases/schema"

// leasesPlugin builds the real leases plugin binary into the test's
// temporary directory (the Go build cache makes the second build cheap).
func leasesPlugin(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "writ-leases")
	out, err := exec.Command("go", "build", "-o", path, "github.com/writ-dev/writ/examples/leases/cmd/writ-leases").CombinedOutput()
	if err != nil {
		t.Fatalf("building the leases plugin: %v\n%s", err, out)
	}
	return path
}

func leasesOptions(t *testing.T, cases int, tiers ...Tier) Options {
	return Options{
		SchemaDir:  leasesSchema,
		PluginPath: leasesPlugin(t),
		Catalogs:   []ir.Catalog{leasesgen.Catalog()},
		OpenState:  openRaftState,
		Only:       tiers,
		Cases:      cases,
	}
}

// requireAllPass fails t for every check of the selected tiers that did
// not pass (NOT RUN included: every static and property check applies to
// the leases schema) or exercised fewer cases than min asks.
func requireAllPass(t *testing.T, rep *Report, tiers []Tier, min map[string]int) {
	t.Helper()
	var text bytes.Buffer
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", text.String())
	want := map[Tier]bool{}
	for _, tr := range tiers {
		want[tr] = true
	}
	ran := 0
	for _, c := range rep.Checks {
		if !want[c.Tier] {
			if c.Result != NotRun || c.Selected {
				t.Errorf("%s: unselected tier reported %s", c.ID, c.Result)
			}
			continue
		}
		ran++
		if c.Result != Pass {
			t.Errorf("%s: %s %s %v", c.ID, c.Result, c.Reason, c.Findings)
		}
		if c.Cases < min[c.ID] {
			t.Errorf("%s exercised only %d cases, want at least %d", c.ID, c.Cases, min[c.ID])
		}
	}
	if ran == 0 {
		t.Fatal("no check of the selected tiers ran")
	}
	if rep.Summary.ExitCode != ExitPass {
		t.Errorf("exit code %d, want 0", rep.Summary.ExitCode)
	}
}

func TestLeasesStatic(t *testing.T) {
	rep := mustRun(t, leasesOptions(t, 2000, TierStatic))
	requireAllPass(t, rep, []Tier{TierStatic}, nil)
	if rep.Fingerprint != leasesgen.Fingerprint {
		t.Errorf("report fingerprint %s, generated %s", rep.Fingerprint, leasesgen.Fingerprint)
	}
}

// TestLeasesProperty runs every property check with 10,000 generated cases
// (CUE oracle, codec round trips, guard folds) and the pipeline workload
// through the real plugin process.
func TestLeasesProperty(t *testing.T) {
	if testing.Short() {
		t.Skip("10,000 cases per check through the real plugin: skipped with -short")
	}
	rep := mustRun(t, leasesOptions(t, DefaultCases, TierProperty))
	requireAllPass(t, rep, []Tier{TierProperty}, minCases)
}

// leasesRig is the real pipeline (over pipelinetest's in-memory log with
// manual commit, as the property tier uses it) with the real leases plugin
// process as its evaluator.
type leasesRig struct {
	t   *testing.T
	r   *rig
	n   int
	ctx context.Context
}

func newLeasesRig(t *testing.T) *leasesRig {
	t.Helper()
	env := newEnv(leasesOptions(t, 100, TierProperty))
	t.Cleanup(env.close)
	if env.Catalog == nil {
		t.Fatal("the leases catalog does not match the schema's fingerprint")
	}
	p, err := env.startPlugin()
	if err != nil {
		t.Fatalf("starting the leases plugin: %v", err)
	}
	r, err := newRig(t.TempDir(), env.Catalog, p.eval)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.stop)
	return &leasesRig{t: t, r: r, ctx: context.Background()}
}

func (l *leasesRig) submit(typ, payload string) pipeline.Outcome {
	l.t.Helper()
	l.n++
	h := l.r.p.SubmitAsync(l.ctx, pipeline.Entry{Type: typ, ID: fmt.Sprintf("req-%d", l.n), Payload: []byte(payload)})
	l.r.drain(l.ctx)
	select {
	case <-h.Done():
		return h.Outcome()
	case <-time.After(30 * time.Second):
		l.t.Fatalf("%s: no outcome", typ)
		return pipeline.Outcome{}
	}
}

func (l *leasesRig) committed(typ, payload string) pipeline.Outcome {
	l.t.Helper()
	o := l.submit(typ, payload)
	if o.Status != pipeline.StatusCommitted || o.Verdict != pipeline.VerdictApply {
		l.t.Fatalf("%s %.200s: want COMMITTED verdict=apply, got %s", typ, payload, o)
	}
	return o
}

func (l *leasesRig) report(typ, id, payload string) {
	l.t.Helper()
	if ack := l.r.p.Report(l.ctx, pipeline.Entry{Type: typ, ID: id, Payload: []byte(payload)}); !ack.Received {
		l.t.Fatalf("%s %s: not received: %+v", typ, id, ack)
	}
	l.r.drain(l.ctx)
}

func (l *leasesRig) state(machine, inst string) string {
	mr, _ := l.r.machine(l.ctx, machine, inst)
	return mr.State
}

func (l *leasesRig) doc(key string, v any) {
	l.t.Helper()
	rec, ok, err := l.r.log.Get(l.ctx, key, false)
	if err != nil || !ok {
		l.t.Fatalf("%s: %v (present %v)", key, err, ok)
	}
	if err := json.Unmarshal(rec.Value, v); err != nil {
		l.t.Fatalf("%s: %v", key, err)
	}
}

type leaseDoc struct {
	State  string `json:"state"`
	Holder string `json:"holder"`
	Epoch  uint64 `json:"epoch"`
	Note   string `json:"note"`
}

// TestLeasesThroughThePipeline walks the lease cycle through the real
// pipeline and guard with the real plugin process: grants carry epochs, an
// acquire of a HELD lease is a committed guard duplicate without a result,
// fencing rejections, an ordered expiry, a stale and a contradicting
// expiry, a receipt of grants at the maximum batch size, and a session loss
// whose handler transitions the pipeline applies.
func TestLeasesThroughThePipeline(t *testing.T) {
	l := newLeasesRig(t)
	l.committed("holder.register", `{"holder_id":"h1","session_ttl_ms":5000,"max_leases":1024}`)
	l.committed("holder.register", `{"holder_id":"h2","session_ttl_ms":5000}`)

	o := l.committed("lease.acquire", `{"lease_id":"l1","holder_id":"h1","ttl_ms":1000}`)
	var res struct {
		Epoch uint64 `json:"epoch"`
		State string `json:"state"`
	}
	if err := json.Unmarshal(o.Result, &res); err != nil || res.Epoch != 1 || res.State != "HELD" {
		t.Fatalf("first grant result %q: %v", o.Result, err)
	}
	o = l.submit("lease.acquire", `{"lease_id":"l1","holder_id":"h2","ttl_ms":1000}`)
	if o.Status != pipeline.StatusCommitted || o.Verdict != pipeline.VerdictDuplicate || len(o.Result) != 0 {
		t.Fatalf("acquire of a HELD lease: want COMMITTED verdict=duplicate without result, got %s result %q", o, o.Result)
	}
	o = l.submit("lease.release", `{"lease_id":"l1","holder_id":"h1","epoch":0}`)
	if o.Status != pipeline.StatusRejected || !strings.Contains(o.Reason, "names the current grant") {
		t.Fatalf("release of another epoch: want REJECTED, got %s", o)
	}
	o = l.submit("lease.control", `{"lease_id":"l1","action":"retire"}`)
	if o.Status != pipeline.StatusRejected || o.Verdict != pipeline.VerdictReject {
		t.Fatalf("retiring a HELD lease: want REJECTED by the guard, got %s", o)
	}

	l.report("lease.expiry", "l1.e1", `{"report_id":"l1.e1","lease_id":"l1","holder_id":"h1","epoch":1,"detected_by":"sweeper"}`)
	if s := l.state("lease", "l1"); s != "EXPIRED" {
		t.Fatalf("after the expiry: %s", s)
	}
	l.committed("lease.acquire", `{"lease_id":"l1","holder_id":"h2","ttl_ms":1000}`)
	// An older epoch is stale; the same epoch under another ID contradicts
	// the recorded order and is quarantined with a conflict case.
	l.report("lease.expiry", "l1.e0", `{"report_id":"l1.e0","lease_id":"l1","holder_id":"h1","epoch":0,"detected_by":"sweeper"}`)
	if _, ok, _ := l.r.log.Get(l.ctx, pipeline.ConflictKey("lease", "l1"), false); ok {
		t.Fatal("a stale expiry opened a conflict case")
	}
	l.report("lease.expiry", "other", `{"report_id":"other","lease_id":"l1","holder_id":"h1","epoch":1,"detected_by":"sweeper-2"}`)
	if _, ok, _ := l.r.log.Get(l.ctx, pipeline.ConflictKey("lease", "l1"), false); !ok {
		t.Fatal("a contradicting expiry opened no conflict case")
	}
	var d leaseDoc
	if l.doc("lease/l1", &d); l.state("lease", "l1") != "HELD" || d.Holder != "h2" || d.Epoch != 2 {
		t.Fatalf("l1 after the late expiries: %s %+v", l.state("lease", "l1"), d)
	}

	// A receipt at the maximum batch size, every item at its maximum.
	items := make([]map[string]any, 256)
	tags := make([]string, 16)
	for i := range tags {
		tags[i] = fmt.Sprintf("%02d%s", i, strings.Repeat("t", 61))
	}
	note := strings.Repeat("ß", 1024)
	for i := range items {
		items[i] = map[string]any{"lease_id": fmt.Sprintf("m%03d%s", i, strings.Repeat("x", 59)), "holder_id": "h1", "ttl_ms": 3_600_000, "tags": tags, "note": note}
	}
	batch, _ := json.Marshal(map[string]any{"batch_id": "b1", "arbiter": "arbiter", "items": items})
	if ack := l.r.p.Deliver(l.ctx, pipeline.Entry{Type: "lease.grant_batch", ID: "b1", Payload: batch}); !ack.Received {
		t.Fatalf("grant batch of %d bytes not received: %+v", len(batch), ack)
	}
	// drain commits up to 200 entries per call.
	for i := 0; i < 4; i++ {
		l.r.drain(l.ctx)
	}
	for i := range items {
		id := items[i]["lease_id"].(string)
		if s := l.state("lease", id); s != "HELD" {
			t.Fatalf("batch item %d (%s): %s", i, id, s)
		}
	}
	if l.doc("lease/"+items[255]["lease_id"].(string), &d); d.Note != note || d.Epoch != 1 {
		t.Fatalf("the last batch item's document: epoch %d, note of %d runes", d.Epoch, len([]rune(d.Note)))
	}

	// h2 is lost: the handler expires l1 by a transition the pipeline guards.
	l.report("holder.session_lost", "lost-1", `{"report_id":"lost-1","holder_id":"h2","seq":1,"detected_by":"sweeper"}`)
	if l.state("holder", "h2") != "LOST" || l.state("lease", "l1") != "EXPIRED" {
		t.Fatalf("after the loss: holder %s, lease %s", l.state("holder", "h2"), l.state("lease", "l1"))
	}
	// h1 shuts down: its 256 leases are released.
	l.report("holder.shutdown", "bye", `{"report_id":"bye","holder_id":"h1","seq":1}`)
	for _, it := range []int{0, 128, 255} {
		if s := l.state("lease", items[it]["lease_id"].(string)); s != "FREE" {
			t.Fatalf("after the shutdown, batch lease %d is %s", it, s)
		}
	}
	if s := l.state("holder", "h1"); s != "DEREGISTERED" {
		t.Fatalf("after the shutdown: holder %s", s)
	}
}
