package robustness

import (
	"strings"
	"testing"
	"time"

	"github.com/writ-dev/writ/api/writv1"
)

// The checkers over hand-made histories: each must fail on the defect it
// names and pass on the same history without it.

func TestLinearizable_FakeHistoryStaleRead(t *testing.T) {
	const key = "_m/job/a"
	cmds := []resolved{{index: 5, call: 0, ret: 10, key: key, desc: "w1"}, {index: 9, call: 20, ret: 30, key: key, desc: "w2"}}
	ops := []Op{
		{Kind: "get", Key: key, Outcome: outOK, Found: true, Rev: 5, Start: 11, End: 12},
		{Kind: "get", Key: key, Outcome: outOK, Found: true, Rev: 9, Start: 31, End: 32},
	}
	finals := map[string][]uint64{key: {9, 9, 9}}
	if r := checkLinearizable(ops, finals, 100, cmds, "", time.Second); !r.ok() || r.Linearized != 1 {
		t.Fatalf("a linearizable history failed: %+v", r)
	}
	// A read that starts after w2 answered COMMITTED sees w1's revision.
	stale := append(ops, Op{Kind: "get", Key: key, Outcome: outOK, Found: true, Rev: 5, Start: 40, End: 41})
	if r := checkLinearizable(stale, finals, 100, cmds, "", time.Second); len(r.Illegal) != 1 {
		t.Fatalf("a stale read passed: %+v", r)
	}
	// A revision no recorded command explains makes the key uncheckable.
	foreign := append(ops, Op{Kind: "get", Key: key, Outcome: outOK, Found: true, Rev: 7, Start: 40, End: 41})
	if r := checkLinearizable(foreign, finals, 100, cmds, "", time.Second); len(r.Uncheckable) != 1 || r.ok() {
		t.Fatalf("an unexplained revision passed: %+v", r)
	}
}

// TestLinearizable_FakeHistoryManyItemWrites: a receipt's items are
// hundreds of committed writes to one key, each known only to lie between
// the delivery and the end of the run, most of them never observed. The
// check decides such a key well within its timeout (it once ran out of its
// 20 s on them, "could not decide"), and still catches a stale read among
// them.
func TestLinearizable_FakeHistoryManyItemWrites(t *testing.T) {
	const key = "_m/job/a"
	var cmds []resolved
	var ops []Op
	for i := uint64(1); i <= 600; i++ {
		cmds = append(cmds, resolved{index: 10 + i, call: 5, ret: 100_000, key: key, desc: "item"})
		if i%25 == 0 { // every 25th is observed by a read
			ops = append(ops, Op{Kind: "get", Key: key, Outcome: outOK, Found: true, Rev: 10 + i, Start: int64(100 * i), End: int64(100*i + 10)})
		}
	}
	finals := map[string][]uint64{key: {610, 610, 610}}
	began := time.Now()
	if r := checkLinearizable(ops, finals, 200_000, cmds, "", 5*time.Second); !r.ok() || r.Linearized != 1 {
		t.Fatalf("a linearizable history of 600 item writes failed: %+v", r)
	}
	if took := time.Since(began); took > 2*time.Second {
		t.Errorf("deciding one key of 600 item writes took %s", took)
	}
	stale := append(ops, Op{Kind: "get", Key: key, Outcome: outOK, Found: true, Rev: 35, Start: 50_000, End: 50_010})
	if r := checkLinearizable(stale, finals, 200_000, cmds, "", 5*time.Second); len(r.Illegal) != 1 {
		t.Fatalf("a stale read among 600 item writes passed: %+v", r)
	}
}

func TestAcknowledged_FakeOutcomes(t *testing.T) {
	committed := func(idx uint64) nodeOutcome {
		return nodeOutcome{known: true, out: writv1.Outcome_COMMITTED, index: idx}
	}
	ops := []Op{
		{Kind: "submit", Type: "t", ID: "r1", Key: "k", Outcome: "COMMITTED", Index: 4, Start: 1, End: 2},
		{Kind: "report", Type: "f", ID: "x", Key: "k", Outcome: outReceived, Start: 1, End: 2},
		{Kind: "submit", Type: "t", ID: "r2", Key: "k", Outcome: "UNAVAILABLE", Start: 3, End: 4},
		{Kind: "submit", Type: "t", ID: "r3", Key: "k", Outcome: "UNCERTAIN", Start: 3, End: 4},
	}
	ids, order := byID(ops)
	good := map[string][]nodeOutcome{
		"r1":       {committed(4), committed(4), committed(4)},
		"fact:f:x": {committed(6), committed(6), committed(6)},
		"r2":       {{}, {}, {}},
		"r3":       {committed(8), committed(8), committed(8)},
	}
	a, b, c, cmds := checkAcknowledged(ids, order, good, 100)
	if !a.Pass || !b.Pass || !c.Pass || len(cmds) != 3 {
		t.Fatalf("a correct history failed: %+v %+v %+v %d", a, b, c, len(cmds))
	}
	bad := map[string][]nodeOutcome{
		"r1":       {committed(4), {}, committed(4)},           // lost on n2
		"fact:f:x": {committed(6), committed(7), committed(6)}, // applied at two indexes
		"r2":       {{}, committed(5), {}},                     // UNAVAILABLE, yet committed
		"r3":       {committed(8), committed(8), committed(8)},
	}
	a, b, c, _ = checkAcknowledged(ids, order, bad, 100)
	if a.Pass || b.Pass || c.Pass {
		t.Fatalf("defects passed: %+v %+v %+v", a, b, c)
	}
	if !strings.Contains(c.Detail[0], "UNAVAILABLE on every attempt") {
		t.Fatalf("refused-absent detail: %v", c.Detail)
	}
}

func TestSettled_FakeOutcomes(t *testing.T) {
	committed := func(idx uint64) nodeOutcome {
		return nodeOutcome{known: true, out: writv1.Outcome_COMMITTED, index: idx}
	}
	fenced := func(idx uint64) nodeOutcome {
		return nodeOutcome{known: true, out: writv1.Outcome_NOT_COMMITTED, index: idx}
	}
	uncertain := nodeOutcome{known: true, out: writv1.Outcome_UNCERTAIN}
	ops := []Op{
		{Kind: "submit", Type: "t", ID: "ok", Outcome: "COMMITTED", Index: 4},
		{Kind: "submit", Type: "t", ID: "u1", Outcome: "UNCERTAIN"},
		{Kind: "submit", Type: "t", ID: "u1", Outcome: outError},
		{Kind: "submit", Type: "t", ID: "u2", Outcome: outError},
		{Kind: "submit", Type: "t", ID: "nc", Outcome: "NOT_COMMITTED", Index: 9},
		{Kind: "submit", Type: "t", ID: "no", Outcome: "UNAVAILABLE"},
		{Kind: "report", Type: "f", ID: "x", Outcome: outError},
	}
	ids, order := byID(ops)
	open := undecided(ids, order)
	if strings.Join(open, ",") != "u1,u2,nc" {
		t.Fatalf("undecided = %v, want u1,u2,nc", open)
	}
	good := map[string][]nodeOutcome{
		"u1": {committed(7), committed(7), committed(7)},
		"u2": {fenced(8), fenced(8), fenced(8)},
		"nc": {fenced(9), fenced(9), fenced(9)},
	}
	r, unc := checkSettled(ids, open, good, nil)
	want := Uncertain{Total: 2, Committed: 1, NotCommitted: 1, Told: 1, ToldConfirmed: 1}
	if !r.Pass || r.Cases != 3 || unc != want {
		t.Fatalf("a correct history failed: %+v %+v", r, unc)
	}
	bad := map[string][]nodeOutcome{
		"u1": {committed(7), fenced(8), committed(7)},       // disagree
		"u2": {fenced(8), {}, uncertain},                    // not definite everywhere
		"nc": {committed(10), committed(10), committed(10)}, // told NOT_COMMITTED, committed
	}
	r, unc = checkSettled(ids, open, bad, map[string]string{"u2": "n2: no leader"})
	if r.Pass || r.Failures != 3 || unc.Unresolved != 1 || unc.Disagreeing != 2 {
		t.Fatalf("defects passed: %+v %+v", r, unc)
	}
	if !strings.Contains(r.Detail[1], "settle: n2: no leader") {
		t.Fatalf("unresolved detail lacks the settle error: %v", r.Detail)
	}
}

// An UNCERTAIN request whose attempt the guard refused at apply is REJECTED
// at that index on every node: definite. REJECTED without an index on some
// node (an answer no log record backs) against a fence elsewhere is not.
func TestSettled_FakeRejectedAtApply(t *testing.T) {
	rejected := func(idx uint64) nodeOutcome {
		return nodeOutcome{known: true, out: writv1.Outcome_REJECTED, index: idx}
	}
	fenced := nodeOutcome{known: true, out: writv1.Outcome_NOT_COMMITTED, index: 251}
	ops := []Op{{Kind: "submit", Type: "t", ID: "u", Outcome: "UNCERTAIN"}}
	ids, order := byID(ops)
	open := undecided(ids, order)
	r, unc := checkSettled(ids, open, map[string][]nodeOutcome{"u": {rejected(143), rejected(143), rejected(143)}}, nil)
	if !r.Pass || unc.Rejected != 1 {
		t.Fatalf("a request rejected at apply everywhere failed: %+v %+v", r, unc)
	}
	for name, os := range map[string][]nodeOutcome{
		"cache answer":     {rejected(0), rejected(0), fenced},
		"different index":  {rejected(143), rejected(144), rejected(143)},
		"rejected, fenced": {rejected(143), fenced, rejected(143)},
	} {
		if r, _ := checkSettled(ids, open, map[string][]nodeOutcome{"u": os}, nil); r.Pass {
			t.Errorf("%s passed: %s", name, describe(os))
		}
	}
}
