package pipeline

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/writ-dev/writ/kv"
	"github.com/writ-dev/writ/schema/ir"
)

var testJob = &ir.Machine{Name: "job", Key: "job_id",
	States:   []string{"PENDING", "HELD", "DISPATCHED", "RUNNING", "COMPLETED", "FAILED", "CANCELLED"},
	Initial:  []string{"PENDING"},
	Terminal: []string{"COMPLETED", "FAILED", "CANCELLED"},
	Transitions: map[string][]string{
		"PENDING": {"DISPATCHED", "HELD", "CANCELLED"}, "HELD": {"PENDING", "CANCELLED"},
		"DISPATCHED": {"RUNNING", "COMPLETED", "FAILED", "PENDING", "CANCELLED"},
		"RUNNING":    {"COMPLETED", "FAILED", "PENDING", "CANCELLED"},
	}}

func TestDecide(t *testing.T) {
	rec := func(s string, o uint64, has bool) MachineRecord {
		return MachineRecord{State: s, Order: o, HasOrder: has}
	}
	cases := []struct {
		name    string
		cur     MachineRecord
		exists  bool
		to      string
		order   uint64
		has     bool
		illegal Verdict
		want    Verdict
	}{
		{"create initial", MachineRecord{}, false, "PENDING", 0, false, VerdictReject, VerdictApply},
		{"create non-initial request", MachineRecord{}, false, "RUNNING", 0, false, VerdictReject, VerdictReject},
		{"create non-initial fact", MachineRecord{}, false, "RUNNING", 0, false, VerdictQuarantine, VerdictQuarantine},
		{"declared", rec("DISPATCHED", 0, false), true, "RUNNING", 1, true, VerdictQuarantine, VerdictApply},
		{"already there", rec("RUNNING", 0, false), true, "RUNNING", 0, false, VerdictReject, VerdictDuplicate},
		{"same seq same state", rec("RUNNING", 4, true), true, "RUNNING", 4, true, VerdictQuarantine, VerdictDuplicate},
		{"older seq", rec("COMPLETED", 4, true), true, "RUNNING", 3, true, VerdictQuarantine, VerdictStale},
		{"terminal regression fact", rec("COMPLETED", 4, true), true, "RUNNING", 5, true, VerdictQuarantine, VerdictQuarantine},
		{"terminal regression request", rec("CANCELLED", 0, false), true, "PENDING", 0, false, VerdictReject, VerdictReject},
		{"undeclared step", rec("PENDING", 0, false), true, "RUNNING", 0, false, VerdictReject, VerdictReject},
		{"unknown state", rec("PENDING", 0, false), true, "LOST", 0, false, VerdictQuarantine, VerdictQuarantine},
		{"same seq other state", rec("RUNNING", 4, true), true, "FAILED", 4, true, VerdictQuarantine, VerdictQuarantine},
	}
	for _, c := range cases {
		got, reason := Decide(testJob, c.cur, c.exists, c.to, c.order, c.has, c.illegal)
		if got != c.want {
			t.Errorf("%s: got %s (%s), want %s", c.name, got, reason, c.want)
		}
		if got != VerdictApply && reason == "" {
			t.Errorf("%s: no reason for %s", c.name, got)
		}
	}
}

func TestMachineRecordRoundTrip(t *testing.T) {
	for _, r := range []MachineRecord{{State: "RUNNING"}, {State: "RUNNING", Order: 3, HasOrder: true}, {State: `we"ird`}} {
		b := r.AppendJSON(nil)
		got, err := ParseMachineRecord(b)
		if err != nil || got != r {
			t.Fatalf("%s: %+v %v", b, got, err)
		}
	}
	if got := string(MachineRecord{State: "RUNNING", Order: 3, HasOrder: true}.AppendJSON(nil)); got != `{"state":"RUNNING","order":3}` {
		t.Fatalf("canonical form %s", got)
	}
	if _, err := ParseMachineRecord([]byte(`{"order":1}`)); err == nil {
		t.Fatal("record without state accepted")
	}
}

func TestGuardEncodingRoundTrip(t *testing.T) {
	g := guardInfo{Attempt: 42, Reason: "why", Transitions: []guardTransition{
		{Machine: "job", Instance: "j1", ExpectRev: 7, From: "PENDING", To: "DISPATCHED", Verdict: VerdictApply},
		{Machine: "job", Instance: "j2", ExpectRev: 0, From: "", FromOrder: 2, FromHas: true, To: "RUNNING", Order: 3, HasOrder: true, Verdict: VerdictQuarantine},
	}}
	got, err := decodeGuard(g.appendTo(nil))
	if err != nil || !reflect.DeepEqual(got, g) {
		t.Fatalf("%+v %v", got, err)
	}
	b := g.appendTo(nil)
	for i := 0; i < len(b); i++ {
		if _, err := decodeGuard(b[:i]); err == nil && i > 0 {
			t.Fatalf("truncated guard (%d of %d bytes) decoded", i, len(b))
		}
	}
}

func FuzzDecodeGuard(f *testing.F) {
	f.Add((&guardInfo{Attempt: 1, Transitions: []guardTransition{{Machine: "job", Instance: "a", To: "PENDING", Verdict: 1}}}).appendTo(nil))
	f.Add([]byte{1, 0, 0, 0})
	f.Add((&guardInfo{Attempt: 2, Transitions: []guardTransition{{Machine: "job", Instance: "a", From: "PENDING", FromScope: "w1", FromScopeHas: true,
		To: "DISPATCHED", Scope: "w2", HasScope: true, Opens: true, Verdict: 1}}}).appendTo(nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		g, err := decodeGuard(b)
		if err != nil {
			return
		}
		if len(b) > 0 && !reflect.DeepEqual(mustDecode(t, g.appendTo(nil)), g) {
			t.Fatalf("round trip changed %+v", g)
		}
		g.Attempt = math.MaxUint64
		if n := len(g.appendTo(nil)); n > g.size() {
			t.Fatalf("encoded %d bytes, size() says at most %d", n, g.size())
		}
	})
}

// The guard buffer is sized once: size() must bound the encoding for any
// attempt number, and not by much (it is allocated for every command).
func TestGuardSize(t *testing.T) {
	for _, g := range []guardInfo{
		{},
		{Reason: strings.Repeat("r", 300)},
		{Transitions: []guardTransition{{Machine: "job", Instance: "j1", ExpectRev: 1 << 40, From: "PENDING", FromOrder: 1 << 20, FromHas: true,
			To: "RUNNING", Order: 300, HasOrder: true, Verdict: VerdictApply}}},
	} {
		for _, a := range []uint64{0, 1, 1 << 60, math.MaxUint64} {
			g.Attempt = a
			n := len(g.appendTo(nil))
			if n > g.size() || g.size()-n > 10 {
				t.Errorf("attempt %d: encoded %d bytes, size() %d", a, n, g.size())
			}
		}
	}
}

func mustDecode(t *testing.T, b []byte) guardInfo {
	g, err := decodeGuard(b)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

type mapReader map[string]kv.Record

func (m mapReader) Get(k string) (kv.Record, bool) { r, ok := m[k]; return r, ok }

type oneMachineCatalog struct{ ir.Catalog }

func (oneMachineCatalog) Machine(name string) (*ir.Machine, bool) {
	if name == "job" {
		return testJob, true
	}
	return nil, false
}

// TestCheckerAtApply: the apply-time guard accepts exactly what evaluation
// decided, vetoes a verdict that no longer holds, and refuses effects that
// write machine records their transitions do not allow.
func TestCheckerAtApply(t *testing.T) {
	c := NewChecker(oneMachineCatalog{})
	tr := guardTransition{Machine: "job", Instance: "j1", ExpectRev: 3, From: "PENDING", To: "HELD", Verdict: VerdictApply}
	w := machineWrite(tr)
	cmd := kv.Command{ID: "req:x", Class: uint8(ir.ClassRequest), Verdict: uint8(VerdictApply),
		Guard: (&guardInfo{Transitions: []guardTransition{tr}}).appendTo(nil), Effect: kv.Effect{Writes: []kv.Write{w}}}
	st := mapReader{"_m/job/j1": {Key: "_m/job/j1", Value: []byte(`{"state":"PENDING"}`), Rev: 3}}
	if err := c.Check(&cmd, st); err != nil {
		t.Fatalf("valid command vetoed: %v", err)
	}
	// state moved to CANCELLED: verdict would now be reject → veto, marked moved
	moved := mapReader{"_m/job/j1": {Key: "_m/job/j1", Value: []byte(`{"state":"CANCELLED"}`), Rev: 9}}
	if err := c.Check(&cmd, moved); err == nil || !strings.Contains(err.Error(), errGuardMovedText) || !errors.Is(err, kv.ErrMoved) {
		t.Fatalf("moved state: %v (want a veto matching kv.ErrMoved, which raftstore records as a conflict)", err)
	}
	// the effect writes a different state than the transition
	bad := cmd
	bad.Effect.Writes = []kv.Write{{Key: "_m/job/j1", Value: []byte(`{"state":"RUNNING"}`), IfRev: 3}}
	if err := c.Check(&bad, st); err == nil || errors.Is(err, kv.ErrMoved) {
		t.Fatalf("mismatched machine write: %v (want a veto that is not kv.ErrMoved)", err)
	}
	// a machine write with no transition
	sneaky := kv.Command{ID: "req:y", Class: uint8(ir.ClassRequest), Guard: (&guardInfo{}).appendTo(nil),
		Effect: kv.Effect{Writes: []kv.Write{{Key: "_m/job/j9", Value: []byte(`{"state":"COMPLETED"}`)}}}}
	if err := c.Check(&sneaky, st); err == nil {
		t.Fatal("unguarded machine write accepted")
	}
	// a recorded rejection must not write
	rej := kv.Command{ID: "req:z", Verdict: uint8(VerdictReject), Guard: (&guardInfo{Reason: "no"}).appendTo(nil),
		Effect: kv.Effect{Writes: []kv.Write{{Key: "job/j1", Value: []byte(`{}`)}}}}
	if err := c.Check(&rej, st); err == nil {
		t.Fatal("recorded rejection with writes accepted")
	}
	// determinism: same command, same state → same answer, every time
	for i := 0; i < 100; i++ {
		e1, e2 := c.Check(&bad, st), c.Check(&bad, st)
		if e1 == nil || e2 == nil || e1.Error() != e2.Error() {
			t.Fatal("checker is not deterministic")
		}
	}
}

func TestNextConflict(t *testing.T) {
	c := ConflictCase{Machine: "job", Instance: "j1", Current: "COMPLETED", Incoming: "RUNNING", Reason: "r"}
	first, err := nextConflict(nil, c)
	if err != nil || first.Revision != 1 || !first.Open {
		t.Fatalf("first: %+v %v", first, err)
	}
	if same, err := nextConflict(first, c); err != nil || same != nil {
		t.Fatalf("re-observation must be idempotent: %+v %v", same, err)
	}
	c2 := c
	c2.Incoming = "FAILED"
	next, err := nextConflict(first, c2)
	if err != nil || next.Revision != 2 {
		t.Fatalf("change: %+v %v", next, err)
	}
	max := *next
	max.Revision = ^uint64(0)
	if _, err := nextConflict(&max, c); err == nil {
		t.Fatal("revision overflow not detected")
	}
}
