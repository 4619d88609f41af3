package handler_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/writ-dev/writ/examples/leases/handler"
	"github.com/writ-dev/writ/examples/leases/leasesgen"
	"github.com/writ-dev/writ/internal/depcheck"
	"github.com/writ-dev/writ/pipeline"
	"github.com/writ-dev/writ/plugins/sdk"
	"github.com/writ-dev/writ/plugins/sdk/sdktest"
)

func TestImportRules(t *testing.T) {
	for _, pkg := range []string{"github.com/writ-dev/writ/examples/leases/handler", "github.com/writ-dev/writ/examples/leases/cmd/writ-leases"} {
		depcheck.Forbid(t, pkg,
			"github.com/writ-dev/writ/plugins/host", "github.com/writ-dev/writ/pipeline",
			"github.com/writ-dev/writ/raftstore", "github.com/writ-dev/writ/membership",
			"github.com/spf13/viper", "go.etcd.io", "github.com/hashicorp/serf", "cuelang.org/go")
	}
}

func TestServesEveryEvaluatedType(t *testing.T) {
	p := handler.Plugin()
	for _, d := range leasesgen.Catalog().Types() {
		_, served := p.Handlers[d.Name]
		evaluated := d.Class.String() == "request" || d.Class.String() == "fact"
		if served != evaluated {
			t.Errorf("type %s (class %s): served=%v, want %v", d.Name, d.Class, served, evaluated)
		}
	}
}

func TestValidationComesFromGeneratedCode(t *testing.T) {
	h := sdktest.New(t, handler.Plugin())
	r := h.Eval(leasesgen.NameLeaseAcquire, "r1", `{"lease_id":"l1","holder_id":"h1","ttl_ms":50}`, sdktest.Absent("lease/l1"), sdktest.Absent("holder/h1"))
	if r.Err == nil || r.Err.Kind != sdk.KindValidation || !strings.Contains(r.Err.Msg, `field "ttl_ms"`) {
		t.Fatalf("want a validation error naming ttl_ms, got %+v", r.Err)
	}
	r = h.Eval(leasesgen.NameLeaseAcquire, "r2", `{"lease_id":"l1","holder_id":"h1","ttl_ms":500,"owner":"me"}`)
	if r.Err == nil || r.Err.Kind != sdk.KindValidation || !strings.Contains(r.Err.Msg, `"owner"`) {
		t.Fatalf("want a validation error naming owner, got %+v", r.Err)
	}
}

func register(w *world, id string, extra string) {
	w.t.Helper()
	w.ok(leasesgen.NameHolderRegister, `{"holder_id":"`+id+`","session_ttl_ms":5000`+extra+`}`)
}

func acquireJSON(lease, holder string, ttl int) string {
	return fmt.Sprintf(`{"lease_id":%q,"holder_id":%q,"ttl_ms":%d}`, lease, holder, ttl)
}

func epochJSON(lease, holder string, epoch uint64) string {
	return fmt.Sprintf(`{"lease_id":%q,"holder_id":%q,"epoch":%d}`, lease, holder, epoch)
}

func expiryJSON(report, lease, holder string, epoch uint64) string {
	return fmt.Sprintf(`{"report_id":%q,"lease_id":%q,"holder_id":%q,"epoch":%d,"detected_by":"sweeper"}`, report, lease, holder, epoch)
}

func result(t *testing.T, r sdk.Result) handler.Result {
	t.Helper()
	var res handler.Result
	if err := json.Unmarshal(r.Result, &res); err != nil {
		t.Fatalf("result %q: %v", r.Result, err)
	}
	return res
}

// TestLeaseCycle_FakeStore walks one lease around its cycle twice
// (FREE → HELD → EXPIRED → HELD → FREE → HELD …) and checks fencing by
// epoch at every step.
func TestLeaseCycle_FakeStore(t *testing.T) {
	w := newWorld(t)
	register(w, "h1", "")
	register(w, "h2", `,"max_leases":4,"address":"h2.eu:7070","labels":["zone=eu-1"]`)
	w.guarded(leasesgen.NameHolderRegister, `{"holder_id":"h1","session_ttl_ms":5000}`, pipeline.VerdictDuplicate)

	w.ok(leasesgen.NameLeaseControl, `{"lease_id":"l1","action":"create","max_ttl_ms":60000}`)
	// Creating it again: FREE → FREE is a guard duplicate.
	w.guarded(leasesgen.NameLeaseControl, `{"lease_id":"l1","action":"create"}`, pipeline.VerdictDuplicate)
	if w.state("lease", "l1") != handler.Free {
		t.Fatalf("a created lease is FREE, got %s", w.state("lease", "l1"))
	}
	w.refused(leasesgen.NameLeaseAcquire, acquireJSON("l1", "h1", 60001), sdk.KindValidation, "max_ttl_ms 60000")
	w.refused(leasesgen.NameLeaseAcquire, acquireJSON("l1", "nobody", 1000), sdk.KindRule, "has not registered")

	// First grant: epoch 1.
	if res := result(t, w.ok(leasesgen.NameLeaseAcquire, acquireJSON("l1", "h1", 1000))); res.Epoch != 1 || res.State != handler.Held {
		t.Fatalf("first grant: %+v", res)
	}
	// Someone else's acquire of a HELD lease is a guard duplicate: the
	// handler is not asked and nothing changes.
	w.guarded(leasesgen.NameLeaseAcquire, acquireJSON("l1", "h2", 1000), pipeline.VerdictDuplicate)
	if l := w.lease("l1"); l.Holder != "h1" || l.Epoch != 1 {
		t.Fatalf("a second acquire changed the lease: %+v", l)
	}
	w.ok(leasesgen.NameLeaseRenew, `{"lease_id":"l1","holder_id":"h1","epoch":1,"ttl_ms":2000}`)
	w.refused(leasesgen.NameLeaseRenew, epochJSON("l1", "h2", 1), sdk.KindRule, "only the current grant")
	w.refused(leasesgen.NameLeaseRenew, epochJSON("l1", "h1", 2), sdk.KindRule, "only the current grant")
	w.refused(leasesgen.NameLeaseRelease, epochJSON("l1", "h1", 0), sdk.KindRule, "names the current grant")
	w.guarded(leasesgen.NameLeaseControl, `{"lease_id":"l1","action":"retire"}`, pipeline.VerdictReject)
	// HELD → FREE is a legal step (for lease.release), so only the handler
	// can refuse creating a lease that is held.
	w.refused(leasesgen.NameLeaseControl, `{"lease_id":"l1","action":"create"}`, sdk.KindRule, "already exists")

	// The grant runs out.
	w.ok(leasesgen.NameLeaseExpiry, expiryJSON("l1.1", "l1", "h1", 1))
	if l, h := w.lease("l1"), w.holder("h1"); w.state("lease", "l1") != handler.Expired || l.State != handler.Expired || l.Expiries != 1 || len(h.Held) != 0 {
		t.Fatalf("after expiry: machine %s lease %+v holder %+v", w.state("lease", "l1"), l, h)
	}
	// The sweeper reports the same expiry again: deduplicated by its ID.
	w.guarded(leasesgen.NameLeaseExpiry, expiryJSON("l1.1", "l1", "h1", 1), pipeline.VerdictDuplicate)
	w.refused(leasesgen.NameLeaseRenew, epochJSON("l1", "h1", 1), sdk.KindRule, "EXPIRED")

	// EXPIRED → HELD: the next holder gets epoch 2.
	if res := result(t, w.ok(leasesgen.NameLeaseAcquire, acquireJSON("l1", "h2", 1000))); res.Epoch != 2 {
		t.Fatalf("second grant: %+v", res)
	}
	// The old holder's late release cannot free the new grant.
	w.refused(leasesgen.NameLeaseRelease, epochJSON("l1", "h1", 1), sdk.KindRule, "names the current grant")
	// An expiry of epoch 1 is now older than the recorded order: stale.
	w.guarded(leasesgen.NameLeaseExpiry, expiryJSON("l1.1-again", "l1", "h1", 0), pipeline.VerdictStale)
	// HELD → FREE → HELD → EXPIRED → FREE: around again.
	w.ok(leasesgen.NameLeaseRelease, epochJSON("l1", "h2", 2))
	w.guarded(leasesgen.NameLeaseRelease, epochJSON("l1", "h2", 2), pipeline.VerdictDuplicate)
	w.ok(leasesgen.NameLeaseAcquire, acquireJSON("l1", "h1", 1000))
	w.ok(leasesgen.NameLeaseExpiry, expiryJSON("l1.3", "l1", "h1", 3))
	w.refused(leasesgen.NameLeaseRelease, epochJSON("l1", "h2", 3), sdk.KindRule, "names the current grant")
	w.ok(leasesgen.NameLeaseRelease, epochJSON("l1", "h1", 3))
	if l := w.lease("l1"); l.State != handler.Free || l.Holder != "" || l.Epoch != 3 || l.Expiries != 2 {
		t.Fatalf("after two cycles: %+v", l)
	}
	// An expiry reported for a FREE lease is quarantined by the guard.
	w.guarded(leasesgen.NameLeaseExpiry, expiryJSON("l1.4", "l1", "h1", 4), pipeline.VerdictQuarantine)
	// Retire: terminal; nothing moves it again.
	w.ok(leasesgen.NameLeaseControl, `{"lease_id":"l1","action":"retire","note":"moved to l2"}`)
	w.guarded(leasesgen.NameLeaseAcquire, acquireJSON("l1", "h1", 1000), pipeline.VerdictReject)
	w.guarded(leasesgen.NameLeaseExpiry, expiryJSON("l1.5", "l1", "h1", 5), pipeline.VerdictQuarantine)
	if w.state("lease", "l1") != handler.Retired || w.quarantined != 2 {
		t.Fatalf("retired lease: state %s, %d quarantined", w.state("lease", "l1"), w.quarantined)
	}
}

// TestStaleExpiryIsRefused_FakeStore: an expiry of an older grant that the
// guard cannot tell apart (no expiry recorded its epoch yet) reaches the
// handler, which refuses it; the fact is kept and nothing moves.
func TestStaleExpiryIsRefused_FakeStore(t *testing.T) {
	w := newWorld(t)
	register(w, "h1", "")
	register(w, "h2", "")
	w.ok(leasesgen.NameLeaseAcquire, acquireJSON("l2", "h1", 1000)) // implicit create, epoch 1
	w.ok(leasesgen.NameLeaseRelease, epochJSON("l2", "h1", 1))
	w.ok(leasesgen.NameLeaseAcquire, acquireJSON("l2", "h2", 1000)) // epoch 2
	w.refused(leasesgen.NameLeaseExpiry, expiryJSON("l2.1", "l2", "h1", 1), sdk.KindRule, "granted to \"h2\" at epoch 2")
	if l := w.lease("l2"); w.state("lease", "l2") != handler.Held || l.Holder != "h2" || l.Epoch != 2 {
		t.Fatalf("a stale expiry moved the lease: %s %+v", w.state("lease", "l2"), l)
	}
	w.ok(leasesgen.NameLeaseExpiry, expiryJSON("l2.2", "l2", "h2", 2))
	if w.state("lease", "l2") != handler.Expired {
		t.Fatal("the current grant's expiry must apply")
	}
}

// TestSessionLossExpiresItsLeases_FakeStore: a lost holder's leases expire
// through handler transitions (the leases are fetched with NeedKeys), the
// holder comes back holding nothing, and its old grants stay fenced.
func TestSessionLossExpiresItsLeases_FakeStore(t *testing.T) {
	w := newWorld(t)
	register(w, "h1", "")
	register(w, "h2", "")
	for _, l := range []string{"a", "b", "c"} {
		w.ok(leasesgen.NameLeaseAcquire, acquireJSON(l, "h1", 1000))
	}
	w.ok(leasesgen.NameLeaseAcquire, acquireJSON("d", "h2", 1000))
	w.ok(leasesgen.NameLeaseRelease, epochJSON("c", "h1", 1))
	r := w.ok(leasesgen.NameHolderSessionLost, `{"report_id":"lost-1","holder_id":"h1","seq":10,"detected_by":"sweeper"}`)
	if len(r.Transitions) != 2 {
		t.Fatalf("want the two HELD leases expired by transition, got %+v", r.Transitions)
	}
	for l, want := range map[string]string{"a": handler.Expired, "b": handler.Expired, "c": handler.Free, "d": handler.Held} {
		if got := w.state("lease", l); got != want || w.lease(l).State != want {
			t.Errorf("lease %s: machine %s doc %s, want %s", l, got, w.lease(l).State, want)
		}
	}
	if h := w.holder("h1"); h.State != handler.Lost || len(h.Held) != 0 || h.Losses != 1 || w.state("holder", "h1") != handler.Lost {
		t.Fatalf("lost holder: %+v", h)
	}
	w.refused(leasesgen.NameLeaseAcquire, acquireJSON("c", "h1", 1000), sdk.KindRule, "is LOST")
	w.guarded(leasesgen.NameHolderSessionLost, `{"report_id":"lost-0","holder_id":"h1","seq":9,"detected_by":"sweeper"}`, pipeline.VerdictStale)
	// LOST → ACTIVE: it comes back and takes a lease under a new epoch.
	register(w, "h1", "")
	if res := result(t, w.ok(leasesgen.NameLeaseAcquire, acquireJSON("a", "h1", 1000))); res.Epoch != 2 {
		t.Fatalf("re-grant after loss: %+v", res)
	}
	w.refused(leasesgen.NameLeaseRenew, epochJSON("a", "h1", 1), sdk.KindRule, "only the current grant")
	// ACTIVE → LOST again: the cycle repeats.
	w.ok(leasesgen.NameHolderSessionLost, `{"report_id":"lost-2","holder_id":"h1","seq":11,"detected_by":"sweeper"}`)
	if w.state("lease", "a") != handler.Expired || w.holder("h1").Losses != 2 {
		t.Fatal("second loss did not expire lease a")
	}
}

func TestHeartbeats_FakeStore(t *testing.T) {
	w := newWorld(t)
	hb := func(id string, seq int, extra string) string {
		return fmt.Sprintf(`{"report_id":%q,"holder_id":"h1","seq":%d%s}`, id, seq, extra)
	}
	w.refused(leasesgen.NameHolderHeartbeat, hb("r0", 1, ""), sdk.KindRule, "has not registered")
	register(w, "h1", "")
	w.ok(leasesgen.NameHolderHeartbeat, hb("r1", 5, `,"load":0.5,"held":["x"],"status":"ok"`))
	w.ok(leasesgen.NameHolderHeartbeat, hb("r2", 3, `,"load":0.9`)) // older: no change
	if h := w.holder("h1"); h.Seq != 5 || *h.Load != 0.5 || !reflect.DeepEqual(h.Reported, []string{"x"}) || h.Status != "ok" {
		t.Fatalf("heartbeat state: %+v", h)
	}
	w.ok(leasesgen.NameHolderHeartbeat, hb("r3", 6, ""))
	if h := w.holder("h1"); h.Seq != 6 || h.Load != nil || h.Status != "" || w.state("holder", "h1") != handler.Active {
		t.Fatalf("a newer heartbeat replaces the report and moves no state: %+v", h)
	}
}

func TestLimitsAndDeregistration_FakeStore(t *testing.T) {
	w := newWorld(t)
	register(w, "h1", `,"max_leases":2`)
	w.ok(leasesgen.NameLeaseAcquire, acquireJSON("a", "h1", 1000))
	w.ok(leasesgen.NameLeaseAcquire, acquireJSON("b", "h1", 1000))
	w.refused(leasesgen.NameLeaseAcquire, acquireJSON("c", "h1", 1000), sdk.KindRule, "max_leases")
	w.refused(leasesgen.NameHolderControl, `{"holder_id":"h1","action":"deregister"}`, sdk.KindRule, "still holds 2 lease(s)")
	w.ok(leasesgen.NameLeaseRelease, epochJSON("a", "h1", 1))
	w.ok(leasesgen.NameLeaseRelease, epochJSON("b", "h1", 1))
	w.ok(leasesgen.NameHolderControl, `{"holder_id":"h1","action":"deregister","reason":"done"}`)
	w.guarded(leasesgen.NameHolderRegister, `{"holder_id":"h1","session_ttl_ms":5000}`, pipeline.VerdictReject)
	w.guarded(leasesgen.NameHolderSessionLost, `{"report_id":"l","holder_id":"h1","seq":1,"detected_by":"s"}`, pipeline.VerdictQuarantine)
	// An unknown holder cannot be created DEREGISTERED (not an initial state).
	w.guarded(leasesgen.NameHolderControl, `{"holder_id":"h9","action":"deregister"}`, pipeline.VerdictReject)
}

// TestGrantBatchItems_FakeStore evaluates a receipt's items one by one, as
// the pipeline does: each is a lease.acquire with its own outcome.
func TestGrantBatchItems_FakeStore(t *testing.T) {
	w := newWorld(t)
	register(w, "h1", "")
	register(w, "h2", "")
	d, _ := leasesgen.Catalog().Type(leasesgen.NameLeaseGrantBatch)
	p, err := d.ParseJSON([]byte(`{"batch_id":"b1","arbiter":"arb","items":[` +
		acquireJSON("x", "h1", 1000) + `,` + acquireJSON("x", "h2", 1000) + `,` + acquireJSON("y", "h2", 1000) + `,` + acquireJSON("z", "h3", 1000) + `]}`))
	if err != nil {
		t.Fatal(err)
	}
	var verdicts []string
	for _, it := range p.Items() {
		js, err := json.Marshal(it)
		if err != nil {
			t.Fatal(err)
		}
		st := w.eval(it.EntryType(), string(js))
		verdicts = append(verdicts, fmt.Sprintf("%s/%v", st.verdict, st.refused))
	}
	if want := []string{"apply/false", "duplicate/false", "apply/false", "apply/true"}; !slices.Equal(verdicts, want) {
		t.Fatalf("item outcomes %v, want %v", verdicts, want)
	}
	if w.lease("x").Holder != "h1" || w.lease("y").Holder != "h2" {
		t.Fatalf("grants: x=%+v y=%+v", w.lease("x"), w.lease("y"))
	}
}

// TestMaximumPayloads_FakeStore: payloads at the schema's maximum sizes
// are evaluated and stored unchanged.
func TestMaximumPayloads_FakeStore(t *testing.T) {
	w := newWorld(t)
	long := func(p string) string { return p + strings.Repeat("z", 63-len(p)) }
	holder, lease := long("h"), long("l")
	labels := make([]string, 32)
	for i := range labels {
		labels[i] = fmt.Sprintf("label%02d=%s", i, strings.Repeat("v", 54))
	}
	lb, _ := json.Marshal(labels)
	addr := strings.Repeat("a", 247) + ":65535"
	register(w, holder, `,"max_leases":1024,"address":"`+addr+`","labels":`+string(lb))
	tags := labels[:16]
	note := strings.Repeat("ü", 1024)
	acq, _ := json.Marshal(map[string]any{"lease_id": lease, "holder_id": holder, "ttl_ms": 3_600_000, "tags": tags, "note": note})
	if res := result(t, w.ok(leasesgen.NameLeaseAcquire, string(acq))); res.TTLMs != 3_600_000 {
		t.Fatalf("max acquire: %+v", res)
	}
	if l := w.lease(lease); !slices.Equal(l.Tags, tags) || l.Note != note {
		t.Fatalf("stored lease lost data: %d tags, note %d runes", len(l.Tags), len([]rune(l.Note)))
	}
	held := make([]string, 64)
	for i := range held {
		held[i] = long(fmt.Sprintf("l%02d", i))
	}
	hb, _ := json.Marshal(map[string]any{"report_id": long("r"), "holder_id": holder, "seq": uint64(1<<64 - 1), "held": held, "load": json.RawMessage("1.0"), "status": strings.Repeat("€", 256)})
	w.ok(leasesgen.NameHolderHeartbeat, string(hb))
	if h := w.holder(holder); !slices.Equal(h.Reported, held) || h.Seq != 1<<64-1 || *h.Load != 1 || len(h.Labels) != 32 || h.Address != addr {
		t.Fatalf("stored holder lost data: %+v", h)
	}
}

// TestEvictAndShutdown_FakeStore: an operator's evict ends a session like a
// loss (leases EXPIRED); a holder's clean shutdown releases its leases
// (FREE) and is final, and a later loss report is quarantined.
func TestEvictAndShutdown_FakeStore(t *testing.T) {
	w := newWorld(t)
	register(w, "h1", "")
	w.ok(leasesgen.NameLeaseAcquire, acquireJSON("a", "h1", 1000))
	w.ok(leasesgen.NameHolderControl, `{"holder_id":"h1","action":"evict","reason":"stuck"}`)
	if w.state("holder", "h1") != handler.Lost || w.state("lease", "a") != handler.Expired || w.holder("h1").Reason != "stuck" {
		t.Fatalf("evict: holder %s lease %s", w.state("holder", "h1"), w.state("lease", "a"))
	}
	w.guarded(leasesgen.NameHolderControl, `{"holder_id":"h1","action":"evict"}`, pipeline.VerdictDuplicate)
	register(w, "h1", "")
	w.ok(leasesgen.NameLeaseAcquire, acquireJSON("a", "h1", 1000))
	w.ok(leasesgen.NameLeaseAcquire, acquireJSON("b", "h1", 1000))
	r := w.ok(leasesgen.NameHolderShutdown, `{"report_id":"bye","holder_id":"h1","seq":5,"reason":"restart"}`)
	if len(r.Transitions) != 2 {
		t.Fatalf("shutdown transitions: %+v", r.Transitions)
	}
	for _, l := range []string{"a", "b"} {
		if got := w.lease(l); w.state("lease", l) != handler.Free || got.State != handler.Free || got.Holder != "" {
			t.Errorf("lease %s after shutdown: machine %s doc %+v", l, w.state("lease", l), got)
		}
	}
	if h := w.holder("h1"); h.State != handler.Deregistered || len(h.Held) != 0 || h.Reason != "restart" {
		t.Fatalf("after shutdown: %+v", h)
	}
	w.guarded(leasesgen.NameHolderSessionLost, `{"report_id":"late","holder_id":"h1","seq":6,"detected_by":"s"}`, pipeline.VerdictQuarantine)
	w.guarded(leasesgen.NameHolderSessionLost, `{"report_id":"older","holder_id":"h1","seq":4,"detected_by":"s"}`, pipeline.VerdictStale)
	w.guarded(leasesgen.NameHolderShutdown, `{"report_id":"bye2","holder_id":"h7","seq":1}`, pipeline.VerdictQuarantine)
}
