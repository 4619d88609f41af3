package robustness

import (
	"errors"
	"strings"
	"testing"

	"github.com/writ-dev/writ/api/writv1"
)

func TestCheckReceipts(t *testing.T) {
	com := func(i uint64) nodeOutcome {
		return nodeOutcome{known: true, out: writv1.Outcome_COMMITTED, index: i, stat: "applied"}
	}
	rej := nodeOutcome{known: true, out: writv1.Outcome_REJECTED, index: 9, stat: "rejected"}
	unk := nodeOutcome{}
	ops := []Op{
		{Kind: "deliver", ID: "r1", Outcome: outReceived, Start: 10, Items: []Item{{ID: "req:r1/0", Type: "a", Key: "_m/x/1"}, {ID: "req:r1/1", Type: "a"}}},
		{Kind: "deliver", ID: "r1", Outcome: outReceived, Start: 20, Items: []Item{{ID: "req:r1/0", Type: "a", Key: "_m/x/1"}, {ID: "req:r1/1", Type: "a"}}},
		{Kind: "deliver", ID: "r2", Outcome: "UNAVAILABLE"},
		{Kind: "deliver", ID: "r3", Outcome: outReceived, Start: 30, Reason: "acknowledged 1 item IDs for 2 items", Items: []Item{{ID: "fact:f:3", Type: "f"}}},
	}
	items, bad := receiptItems(ops)
	if len(items) != 3 || items[0].delivered != 2 || items[0].first != 10 || len(bad) != 1 {
		t.Fatalf("receiptItems: %+v, bad %v", items, bad)
	}
	if again := redelivered(items); !again["req:r1/0"] || again["fact:f:3"] {
		t.Fatalf("redelivered: %v", again)
	}
	for _, c := range []struct {
		name string
		res  map[string][]nodeOutcome
		want string // "" passes (the bad acknowledgement aside)
	}{
		{"agreeing", map[string][]nodeOutcome{"req:r1/0": {com(5), com(5), com(5)}, "req:r1/1": {rej, rej, rej}, "fact:f:3": {com(6), com(6), com(6)}}, ""},
		{"unlogged everywhere", map[string][]nodeOutcome{"req:r1/0": {unk, unk, unk}, "req:r1/1": {rej, rej, rej}, "fact:f:3": {com(6), com(6), com(6)}}, ""},
		{"one node lacks it", map[string][]nodeOutcome{"req:r1/0": {com(5), unk, com(5)}, "req:r1/1": {rej, rej, rej}, "fact:f:3": {com(6), com(6), com(6)}}, "nodes disagree"},
		{"indexes differ", map[string][]nodeOutcome{"req:r1/0": {com(5), com(5), com(7)}, "req:r1/1": {rej, rej, rej}, "fact:f:3": {com(6), com(6), com(6)}}, "nodes disagree"},
		{"unreadable", map[string][]nodeOutcome{"req:r1/0": {com(5), {err: errors.New("down")}, com(5)}, "req:r1/1": {rej, rej, rej}, "fact:f:3": {com(6), com(6), com(6)}}, "nodes disagree"},
		{"fact item lost", map[string][]nodeOutcome{"req:r1/0": {com(5), com(5), com(5)}, "req:r1/1": {rej, rej, rej}, "fact:f:3": {unk, unk, unk}}, "fact item fact:f:3"},
	} {
		r, cmds, st := checkReceipts(items, nil, c.res, 99)
		d := strings.Join(r.Detail, "\n")
		switch {
		case c.want == "" && !r.Pass:
			t.Errorf("%s: failed: %s", c.name, d)
		case c.want != "" && (r.Pass || !strings.Contains(d, c.want)):
			t.Errorf("%s: %v %q, want a failure naming %q", c.name, r.Pass, d, c.want)
		}
		if c.name == "agreeing" {
			if st != (receiptStats{Items: 3, Committed: 2, Rejected: 1}) || len(cmds) != 2 || cmds[0].id != "req:r1/0" || cmds[0].call != 10 || cmds[0].ret != 99 || cmds[0].key != "_m/x/1" {
				t.Errorf("agreeing: stats %+v, commands %+v", st, cmds)
			}
		}
	}
	if r, _, _ := checkReceipts(items, bad, map[string][]nodeOutcome{"req:r1/0": {unk}, "req:r1/1": {unk}, "fact:f:3": {com(1)}}, 99); r.Pass || !strings.Contains(r.Detail[0], "acknowledged 1 item IDs") {
		t.Errorf("a bad acknowledgement passed: %+v", r)
	}
}
