package pipeline

import (
	"reflect"
	"strings"
	"testing"

	"github.com/writ-dev/writ/kv"
	"github.com/writ-dev/writ/schema/ir"
)

// testHealth is a cyclic machine: an instance moves back and forth between
// HEALTHY and UNHEALTHY, and RETIRED ends it.
var testHealth = &ir.Machine{Name: "health", Key: "target",
	States: []string{"UNKNOWN", "HEALTHY", "UNHEALTHY", "RETIRED"}, Initial: []string{"UNKNOWN"}, Terminal: []string{"RETIRED"},
	Transitions: map[string][]string{
		"UNKNOWN":   {"HEALTHY", "UNHEALTHY", "RETIRED"},
		"HEALTHY":   {"UNHEALTHY", "UNKNOWN", "RETIRED"},
		"UNHEALTHY": {"HEALTHY", "UNKNOWN", "RETIRED"},
	}}

// fold applies each incoming entry the way the pipeline and every replica
// do: DecideIncoming, then NextRecord. It returns the final record and the
// verdicts.
func fold(m *ir.Machine, cur MachineRecord, exists bool, illegal Verdict, ins ...Incoming) (MachineRecord, []Verdict) {
	var vs []Verdict
	for _, in := range ins {
		v, _ := DecideIncoming(m, cur, exists, in, illegal)
		vs = append(vs, v)
		if next, changed := NextRecord(cur, exists, in, v); changed {
			cur, exists = next, true
		}
	}
	return cur, vs
}

func at(state string, order uint64) Incoming {
	return Incoming{To: state, Order: order, HasOrder: true}
}

func in(state string, order uint64, scope string) Incoming {
	return Incoming{To: state, Order: order, HasOrder: true, Scope: scope, HasScope: true}
}

func opens(state, scope string) Incoming {
	return Incoming{To: state, Scope: scope, HasScope: true, Opens: true}
}

// TestNewerReportOfCurrentStateAdvancesOrder is issue 13 defect 2: on a
// cyclic machine, UNHEALTHY@3, UNHEALTHY@11, then a late HEALTHY@6 must
// end UNHEALTHY@11: the newer re-report advances the recorded order, so
// the late older report is stale.
func TestNewerReportOfCurrentStateAdvancesOrder(t *testing.T) {
	start := MachineRecord{State: "UNKNOWN"}
	got, vs := fold(testHealth, start, true, VerdictQuarantine, at("UNHEALTHY", 3), at("UNHEALTHY", 11), at("HEALTHY", 6))
	want := MachineRecord{State: "UNHEALTHY", Order: 11, HasOrder: true}
	if got != want {
		t.Fatalf("final %+v, want %+v (verdicts %v)", got, want, vs)
	}
	if wantV := []Verdict{VerdictApply, VerdictDuplicate, VerdictStale}; !reflect.DeepEqual(vs, wantV) {
		t.Fatalf("verdicts %v, want %v", vs, wantV)
	}
	// the same re-report again, and an equal order, change nothing
	for _, again := range []Incoming{at("UNHEALTHY", 11), at("UNHEALTHY", 4), {To: "UNHEALTHY"}} {
		if next, changed := NextRecord(got, true, again, VerdictDuplicate); changed {
			t.Fatalf("%+v changed %+v to %+v", again, got, next)
		}
	}
}

// TestOrderEpochs is issue 13 defect 3 at the guard: an assignment opens a
// new order epoch, so the new worker's reports, numbered from 1, apply,
// and the previous worker's late reports are illegal (quarantined).
func TestOrderEpochs(t *testing.T) {
	type step struct {
		in   Incoming
		ill  Verdict
		want Verdict
		rec  string
	}
	steps := []step{
		{opens("DISPATCHED", "wa"), VerdictReject, VerdictApply, `{"state":"DISPATCHED","scope":"wa"}`},
		{in("RUNNING", 5, "wa"), VerdictQuarantine, VerdictApply, `{"state":"RUNNING","scope":"wa","order":5}`},
		// the worker died: the handler moves the job back (no order, no epoch)
		{Incoming{To: "PENDING"}, VerdictQuarantine, VerdictApply, `{"state":"PENDING","scope":"wa","order":5}`},
		// a late report of the dead worker: PENDING → RUNNING is illegal
		{in("RUNNING", 6, "wa"), VerdictQuarantine, VerdictQuarantine, `{"state":"PENDING","scope":"wa","order":5}`},
		{opens("DISPATCHED", "wb"), VerdictReject, VerdictApply, `{"state":"DISPATCHED","scope":"wb"}`},
		// the same assignment again is a duplicate; another worker is refused
		{opens("DISPATCHED", "wb"), VerdictReject, VerdictDuplicate, `{"state":"DISPATCHED","scope":"wb"}`},
		{opens("DISPATCHED", "wc"), VerdictReject, VerdictReject, `{"state":"DISPATCHED","scope":"wb"}`},
		// the dead worker's report after the new assignment: another epoch
		{in("RUNNING", 7, "wa"), VerdictQuarantine, VerdictQuarantine, `{"state":"DISPATCHED","scope":"wb"}`},
		{in("RUNNING", 1, "wb"), VerdictQuarantine, VerdictApply, `{"state":"RUNNING","scope":"wb","order":1}`},
		{in("RUNNING", 1, "wb"), VerdictQuarantine, VerdictDuplicate, `{"state":"RUNNING","scope":"wb","order":1}`},
		{in("COMPLETED", 2, "wb"), VerdictQuarantine, VerdictApply, `{"state":"COMPLETED","scope":"wb","order":2}`},
		{in("RUNNING", 1, "wb"), VerdictQuarantine, VerdictStale, `{"state":"COMPLETED","scope":"wb","order":2}`},
		{in("FAILED", 3, "wb"), VerdictQuarantine, VerdictQuarantine, `{"state":"COMPLETED","scope":"wb","order":2}`},
	}
	cur := MachineRecord{State: "PENDING"}
	for i, s := range steps {
		v, reason := DecideIncoming(testJob, cur, true, s.in, s.ill)
		if v != s.want {
			t.Fatalf("step %d %+v on %+v: verdict %s (%s), want %s", i, s.in, cur, v, reason, s.want)
		}
		if v != VerdictApply && reason == "" {
			t.Fatalf("step %d: %s without a reason", i, v)
		}
		if next, changed := NextRecord(cur, true, s.in, v); changed {
			cur = next
		}
		if got := string(cur.AppendJSON(nil)); got != s.rec {
			t.Fatalf("step %d %+v: record %s, want %s", i, s.in, got, s.rec)
		}
	}
}

func TestDecideIncomingReasons(t *testing.T) {
	cur := MachineRecord{State: "DISPATCHED", Scope: "wb", HasScope: true}
	_, why := DecideIncoming(testJob, cur, true, in("RUNNING", 3, "wa"), VerdictQuarantine)
	if !strings.Contains(why, `"wa"`) || !strings.Contains(why, `"wb"`) {
		t.Fatalf("epoch mismatch reason %q names neither epoch", why)
	}
	_, why = DecideIncoming(testJob, cur, true, opens("DISPATCHED", "wc"), VerdictReject)
	if !strings.Contains(why, "DISPATCHED → DISPATCHED") {
		t.Fatalf("re-open reason %q does not name the missing transition", why)
	}
	// the unscoped Decide is DecideIncoming without an epoch
	for _, c := range []struct {
		cur MachineRecord
		to  string
		o   uint64
		has bool
	}{{MachineRecord{State: "RUNNING", Order: 4, HasOrder: true}, "RUNNING", 9, true}, {MachineRecord{State: "RUNNING"}, "COMPLETED", 0, false}} {
		v1, r1 := Decide(testJob, c.cur, true, c.to, c.o, c.has, VerdictQuarantine)
		v2, r2 := DecideIncoming(testJob, c.cur, true, Incoming{To: c.to, Order: c.o, HasOrder: c.has}, VerdictQuarantine)
		if v1 != v2 || r1 != r2 {
			t.Fatalf("Decide %s %q, DecideIncoming %s %q", v1, r1, v2, r2)
		}
	}
}

func TestMachineRecordScopeRoundTrip(t *testing.T) {
	for _, r := range []MachineRecord{
		{State: "RUNNING", Scope: "w1", HasScope: true},
		{State: "RUNNING", Scope: "w1", HasScope: true, Order: 1<<64 - 1, HasOrder: true},
		{State: "RUNNING", Scope: "", HasScope: true, Order: 2, HasOrder: true},
		{State: "RUNNING", Scope: `q"b\s`, HasScope: true},
		{State: "RUNNING", Scope: "é\u2028<&>\x01", HasScope: true, Order: 0, HasOrder: true},
	} {
		b := r.AppendJSON(nil)
		got, err := parseMachineRecord(b, testJob)
		if err != nil || got != r {
			t.Fatalf("%s: %+v %v, want %+v", b, got, err, r)
		}
		if _, ok := parseCanonicalRecord(b, nil); !ok && plainASCII(r.Scope) {
			t.Fatalf("%s: canonical form not taken by the fast path", b)
		}
	}
	if got := string(MachineRecord{State: "A", Scope: "w", HasScope: true, Order: 3, HasOrder: true}.AppendJSON(nil)); got != `{"state":"A","scope":"w","order":3}` {
		t.Fatalf("canonical form %s", got)
	}
}

// A guard without order epochs still encodes as version 1, byte for byte,
// so a schema without order_scope replicates as before; one with epochs
// encodes as version 2 and round-trips.
func TestGuardEncodingEpochs(t *testing.T) {
	plain := guardInfo{Attempt: 3, Transitions: []guardTransition{{Machine: "job", Instance: "j1", To: "PENDING", Verdict: VerdictApply}}}
	if b := plain.appendTo(nil); b[0] != guardVersion {
		t.Fatalf("guard without epochs encoded as version %d", b[0])
	}
	g := guardInfo{Attempt: 9, Transitions: []guardTransition{
		{Machine: "job", Instance: "j1", ExpectRev: 4, From: "PENDING", FromOrder: 5, FromHas: true, FromScope: "wa", FromScopeHas: true,
			To: "DISPATCHED", Scope: "wb", HasScope: true, Opens: true, Verdict: VerdictApply},
		{Machine: "job", Instance: "j2", To: "RUNNING", Order: 1, HasOrder: true, Scope: "", HasScope: true, Verdict: VerdictDuplicate},
		{Machine: "job", Instance: "j3", To: "PENDING", Verdict: VerdictApply},
	}}
	b := g.appendTo(nil)
	if b[0] != guardVersionEpochs {
		t.Fatalf("guard with epochs encoded as version %d", b[0])
	}
	got, err := decodeGuard(b)
	if err != nil || !reflect.DeepEqual(got, g) {
		t.Fatalf("%+v %v", got, err)
	}
	if n := len(b); n > g.size() || g.size()-n > 10 {
		t.Fatalf("encoded %d bytes, size() %d", n, g.size())
	}
	for i := 1; i < len(b); i++ {
		if _, err := decodeGuard(b[:i]); err == nil {
			t.Fatalf("truncated guard (%d of %d bytes) decoded", i, len(b))
		}
	}
	bad := append([]byte(nil), b...)
	bad[len(bad)-1] = 0xf8 // the last transition's flags byte: only unknown bits
	if _, err := decodeGuard(bad); err == nil {
		t.Fatal("unknown epoch flags decoded")
	}
}

// TestCheckerDuplicateAdvances: at apply, a duplicate with a newer order
// must carry the write of the advanced record, and nothing else.
func TestCheckerDuplicateAdvances(t *testing.T) {
	c := NewChecker(oneMachineCatalog{})
	st := mapReader{"_m/job/j1": {Key: "_m/job/j1", Value: []byte(`{"state":"RUNNING","scope":"w1","order":3}`), Rev: 5}}
	cur, _ := ParseMachineRecord(st["_m/job/j1"].Value)
	cmdFor := func(inc Incoming) (kv.Command, guardTransition) {
		v, _ := DecideIncoming(testJob, cur, true, inc, VerdictQuarantine)
		tr := newGuardTransition("job", "j1", 5, cur, true, inc, v)
		cmd := kv.Command{ID: "fact:x", Class: uint8(ir.ClassFact), Verdict: uint8(v), Guard: (&guardInfo{Transitions: []guardTransition{tr}}).appendTo(nil)}
		if w, ok := recordWrite(&tr); ok {
			cmd.Effect.Writes = []kv.Write{w}
		}
		return cmd, tr
	}
	adv, tr := cmdFor(in("RUNNING", 11, "w1"))
	if tr.Verdict != VerdictDuplicate || len(adv.Effect.Writes) != 1 || string(adv.Effect.Writes[0].Value) != `{"state":"RUNNING","scope":"w1","order":11}` {
		t.Fatalf("advancing duplicate: verdict %s, writes %+v", tr.Verdict, adv.Effect.Writes)
	}
	if err := c.Check(&adv, st); err != nil {
		t.Fatalf("advancing duplicate vetoed: %v", err)
	}
	noWrite := adv
	noWrite.Effect.Writes = nil
	if err := c.Check(&noWrite, st); err == nil {
		t.Fatal("advancing duplicate without its record write accepted")
	}
	wrong := adv
	wrong.Effect.Writes = []kv.Write{{Key: "_m/job/j1", Value: []byte(`{"state":"RUNNING","scope":"w1","order":12}`), IfRev: 5}}
	if err := c.Check(&wrong, st); err == nil {
		t.Fatal("advancing duplicate writing another order accepted")
	}
	same, tr := cmdFor(in("RUNNING", 3, "w1"))
	if tr.Verdict != VerdictDuplicate || len(same.Effect.Writes) != 0 {
		t.Fatalf("equal order: verdict %s, writes %+v", tr.Verdict, same.Effect.Writes)
	}
	if err := c.Check(&same, st); err != nil {
		t.Fatalf("plain duplicate vetoed: %v", err)
	}
	sneaky := same
	sneaky.Effect.Writes = []kv.Write{{Key: "_m/job/j1", Value: []byte(`{"state":"RUNNING","scope":"w1","order":3}`), IfRev: 5}}
	if err := c.Check(&sneaky, st); err == nil {
		t.Fatal("plain duplicate with a record write accepted")
	}
	other, tr := cmdFor(in("COMPLETED", 9, "w2"))
	if tr.Verdict != VerdictQuarantine || len(other.Effect.Writes) != 0 {
		t.Fatalf("other epoch: verdict %s, writes %+v", tr.Verdict, other.Effect.Writes)
	}
	if err := c.Check(&other, st); err != nil {
		t.Fatalf("quarantine vetoed: %v", err)
	}
}

// plainPayload hides a payload's OrderScope method, as a payload from a
// catalog that does not implement ir.OrderScoper.
type plainPayload struct{ ir.Payload }

func TestOrderScopeFromJSONWhenThePayloadHasNoAccessor(t *testing.T) {
	data := []byte(`{"report_id":"r1","job_id":"j1","state":"RUNNING","seq":3,"worker_id":"w\u00e91","n": 12 }`)
	if s, ok := orderScopeOf(plainPayload{}, data, "worker_id"); !ok || s != "wé1" {
		t.Fatalf("string field: %q %v", s, ok)
	}
	if s, ok := orderScopeOf(plainPayload{}, data, "n"); !ok || s != "12" {
		t.Fatalf("integer field: %q %v", s, ok)
	}
	if _, ok := orderScopeOf(plainPayload{}, data, "absent"); ok {
		t.Fatal("absent field has a scope")
	}
}
