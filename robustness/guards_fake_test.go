package robustness

import (
	"strings"
	"testing"

	"github.com/writ-dev/writ/conformance"
)

// Check (e) over hand-made reads of the jobs schema's machine records: it
// must fail on a terminal state left, on a stale order applied and on two
// records at one revision, and pass without them.
func TestGuards_FakeReads(t *testing.T) {
	gen, err := conformance.NewGenerator(jobsSchema, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer gen.Close()
	cat := gen.Catalog()
	const key = "_m/job/a"
	ts := []target{{machine: "job", inst: "a", key: key}}
	get := func(rev uint64, v string) Op {
		return Op{Kind: "get", Key: key, Outcome: outOK, Found: true, Rev: rev, Value: v}
	}
	final := func(rev uint64, v string) map[string][]recordRead {
		return map[string][]recordRead{key: {{rev: rev, value: v, where: "final n1"}}}
	}
	check := func(name string, ops []Op, finals map[string][]recordRead, cmds []resolved, want string) {
		t.Helper()
		r := checkGuards(cat, ts, ops, finals, cmds)
		switch {
		case want == "" && !r.Pass:
			t.Errorf("%s: failed: %v", name, r.Detail)
		case want != "" && (r.Pass || !strings.Contains(strings.Join(r.Detail, "\n"), want)):
			t.Errorf("%s: want a failure with %q, got pass=%v %v", name, want, r.Pass, r.Detail)
		}
	}
	ok := []Op{
		get(3, `{"state":"PENDING"}`),
		get(7, `{"state":"DISPATCHED","scope":"w1"}`),
		get(9, `{"state":"RUNNING","scope":"w1","order":4}`),
		get(9, `{"state":"RUNNING","scope":"w1","order":4}`),
		get(12, `{"state":"RUNNING","scope":"w1","order":6}`),
	}
	check("legal", ok, final(15, `{"state":"COMPLETED","scope":"w1","order":7}`), nil, "")
	// reads come in any order: the revision orders them
	check("unordered", []Op{ok[4], ok[0], ok[2], ok[1]}, final(12, `{"state":"RUNNING","scope":"w1","order":6}`), nil, "")
	check("terminal left", ok[:2], map[string][]recordRead{key: {
		{rev: 10, value: `{"state":"CANCELLED","scope":"w1"}`, where: "n1 get"},
		{rev: 14, value: `{"state":"PENDING","scope":"w1"}`, where: "final n1"},
	}}, nil, "left terminal state CANCELLED")
	stale := append(append([]Op(nil), ok...), get(13, `{"state":"RUNNING","scope":"w1","order":5}`))
	check("stale order", stale, nil, nil, "stale order applied: rev 12 order 6")
	// an assignment to the same worker between the revisions opens a new
	// epoch (the order restarts): not stale
	check("epoch reopened", stale, nil, []resolved{{index: 13, key: key, typ: "job.assign"}}, "")
	check("new epoch", append(append([]Op(nil), ok...), get(14, `{"state":"RUNNING","scope":"w2","order":1}`)), nil, nil, "")
	check("one revision, two records", append(append([]Op(nil), ok...), get(12, `{"state":"FAILED","scope":"w1","order":6}`)), nil, nil, "rev 12 read as")
}
