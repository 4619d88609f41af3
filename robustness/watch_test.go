package robustness

import (
	"errors"
	"strings"
	"testing"
)

func TestCompactedFrom(t *testing.T) {
	for _, c := range []struct {
		err  string
		want uint64
		ok   bool
	}{
		{"client: watch on 127.0.0.1:1: rpc error: code = OutOfRange desc = compacted: re-list state and watch from index 4120", 4120, true},
		{"compacted: re-list state and watch from index 7: more", 7, true},
		{"rpc error: code = Unavailable desc = no leader", 0, false},
		{"compacted: re-list state and watch from index x", 0, false},
	} {
		got, ok := compactedFrom(errors.New(c.err))
		if got != c.want || ok != c.ok {
			t.Errorf("compactedFrom(%q) = %d, %v; want %d, %v", c.err, got, ok, c.want, c.ok)
		}
	}
}

func TestCheckWatch(t *testing.T) {
	ev := func(i uint64, id, st string) watchEvent { return watchEvent{index: i, id: id, status: st} }
	for _, c := range []struct {
		name      string
		evs       []watchEvent
		gaps      []watchGap
		committed map[string]uint64
		again     map[string]bool
		want      string // "" passes; else a failure contains it
	}{
		{"complete", []watchEvent{ev(3, "req:a", "applied"), ev(3, "fact:t:f", "applied"), ev(5, "req:a", "duplicate")},
			nil, map[string]uint64{"a": 3, "fact:t:f": 3}, nil, ""},
		{"missing", []watchEvent{ev(3, "req:a", "applied"), ev(6, "req:c", "applied")},
			nil, map[string]uint64{"a": 3, "b": 4}, nil, "delivered no event"},
		{"excused by a compacted range", []watchEvent{ev(9, "req:c", "applied")},
			[]watchGap{{from: 1, to: 8}}, map[string]uint64{"b": 4, "c": 9}, nil, ""},
		{"stopped early", []watchEvent{ev(3, "req:a", "applied")},
			nil, map[string]uint64{"a": 3, "b": 8}, nil, "the watch stopped at 3"},
		{"twice", []watchEvent{ev(3, "req:a", "applied"), ev(3, "req:a", "applied")},
			nil, map[string]uint64{"a": 3}, nil, "delivered twice"},
		{"out of order", []watchEvent{ev(4, "req:b", "applied"), ev(3, "req:a", "applied")},
			nil, map[string]uint64{"a": 3, "b": 4}, nil, "delivered after index 4"},
		{"applied at two indexes", []watchEvent{ev(3, "req:a", "applied"), ev(5, "req:a", "applied")},
			nil, map[string]uint64{"a": 3}, nil, "applied at 5 too"},
		{"receipt item uncertain, then committed", []watchEvent{ev(4, "req:r/1", "uncertain"), ev(7, "req:r/1", "applied")},
			nil, map[string]uint64{"req:r/1": 7}, nil, ""},
		{"receipt item unavailable, committed on redelivery", []watchEvent{ev(4, "req:r/1", "unavailable"), ev(7, "req:r/1", "applied")},
			nil, map[string]uint64{"req:r/1": 7}, map[string]bool{"req:r/1": true}, ""},
		{"receipt item unavailable, committed without redelivery", []watchEvent{ev(4, "req:r/1", "unavailable"), ev(7, "req:r/1", "applied")},
			nil, map[string]uint64{"req:r/1": 7}, nil, "unavailable at 4 too"},
		{"receipt item unavailable after it committed", []watchEvent{ev(7, "req:r/1", "applied"), ev(8, "req:r/1", "unavailable")},
			nil, map[string]uint64{"req:r/1": 7}, nil, "unavailable at 8 too"},
		{"redelivered receipt item unavailable after it committed", []watchEvent{ev(7, "req:r/1", "applied"), ev(8, "req:r/1", "unavailable")},
			nil, map[string]uint64{"req:r/1": 7}, map[string]bool{"req:r/1": true}, ""},
	} {
		r := checkWatch(&watchLog{evs: c.evs, gaps: c.gaps}, c.committed, c.again)
		d := strings.Join(r.Detail, "\n")
		switch {
		case c.want == "" && !r.Pass:
			t.Errorf("%s: failed: %s", c.name, d)
		case c.want != "" && r.Pass:
			t.Errorf("%s: passed, want a failure naming %q", c.name, c.want)
		case c.want != "" && !strings.Contains(d, c.want):
			t.Errorf("%s: failures %q do not name %q", c.name, d, c.want)
		}
	}
}

func TestCheckReuse(t *testing.T) {
	ok := checkReuse([]Op{{Kind: "reuse", ID: "a", Outcome: "REJECTED", Reason: "request ID reused with a different payload: ..."},
		{Kind: "reuse", ID: "b", Outcome: "UNCERTAIN"}, {Kind: "submit", ID: "c", Outcome: "COMMITTED"}})
	if !ok.Pass || ok.Cases != 2 {
		t.Fatalf("refused reuses: %+v", ok)
	}
	if r := checkReuse([]Op{{Kind: "reuse", ID: "a", Outcome: "COMMITTED", Index: 4}}); r.Pass {
		t.Fatal("a reuse answered COMMITTED passed")
	}
	// A lagging node's guard may refuse the new payload before it is
	// appended: a refusal all the same.
	if r := checkReuse([]Op{{Kind: "reuse", ID: "a", Outcome: "REJECTED", Reason: "worker: REMOVED is terminal"}}); !r.Pass {
		t.Fatalf("a reuse refused by the guard failed: %+v", r)
	}
}
