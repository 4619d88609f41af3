package robustness

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/writ-dev/writ/api/writv1"
)

// TestConfigCheck_FakeHistory: check (f) passes on a history whose
// confirmed change activated everywhere, whose failed change activated
// nowhere and whose nodes reloaded only the activated change and hold its
// tag, and fails on each way W5 can be broken.
func TestConfigCheck_FakeHistory(t *testing.T) {
	applied := func(idx uint64) []nodeOutcome {
		o := nodeOutcome{known: true, out: writv1.Outcome_COMMITTED, index: idx, stat: "applied"}
		return []nodeOutcome{o, o, o}
	}
	none := []nodeOutcome{{}, {}, {}}
	ops := []Op{
		{Kind: "config", ID: "c1", Payload: "1", Outcome: "COMMITTED", Index: 10},
		{Kind: "config", ID: "c2", Payload: "2", Outcome: outFailed, Reason: "aborted"},
		{Kind: "config", ID: "c3", Payload: "3", Outcome: "UNCERTAIN"},
	}
	outs := map[string][]nodeOutcome{activateID("c1"): applied(10), activateID("c2"): none, activateID("c3"): none}
	reloads := func() []map[string]string {
		return []map[string]string{{"c1": "1"}, {"c1": "1"}, {"c1": "1"}}
	}
	good := configFinal{tags: []string{"1", "1", "1"}, reloads: reloads()}
	if r := checkConfig(ops, outs, good); !r.Pass || r.Cases != 3 {
		t.Fatalf("a W5-abiding history failed: %+v", r)
	}
	for name, c := range map[string]struct {
		outs map[string][]nodeOutcome
		fin  configFinal
		want string
	}{
		"confirmed lost":    {map[string][]nodeOutcome{activateID("c1"): none}, configFinal{tags: []string{"0", "0", "0"}, reloads: []map[string]string{{}, {}, {}}}, "confirmed activated"},
		"failed activated":  {map[string][]nodeOutcome{activateID("c1"): applied(10), activateID("c2"): applied(12)}, configFinal{tags: []string{"2", "2", "2"}, reloads: []map[string]string{{"c2": "2"}, {"c2": "2"}, {"c2": "2"}}}, "reported FAILED"},
		"reload not active": {outs, configFinal{tags: []string{"1", "1", "1"}, reloads: []map[string]string{{"c1": "1"}, {"c1": "1", "c3": "3"}, {"c1": "1"}}}, "n2 reloaded config c3"},
		"tag not active":    {outs, configFinal{tags: []string{"1", "3", "1"}, reloads: reloads()}, `n2's committed config tag is "3"`},
		"never reloaded":    {outs, configFinal{tags: []string{"1", "1", "1"}, reloads: []map[string]string{{"c1": "1"}, {}, {"c1": "1"}}}, "n2 never reloaded config c1"},
	} {
		r := checkConfig(ops, c.outs, c.fin)
		if r.Pass || !strings.Contains(strings.Join(r.Detail, "\n"), c.want) {
			t.Errorf("%s: want a failure saying %q: %+v", name, c.want, r)
		}
	}
}

// TestReloadsIn reads writ's own reload lines from a node log and skips a
// schema config type's.
func TestReloadsIn(t *testing.T) {
	p := filepath.Join(t.TempDir(), "n1.log")
	log := `time=x level=INFO msg="writd: configuration activated" node=n1 id=s1-cfg2 version=2 generation=1 index=40 restart_required=[]
time=x level=INFO msg="writd: configuration activated" node=n1 type=lease.config id=l1 version=7 generation=1 index=41
time=x level=INFO msg="writd: started" node=n1
`
	if err := os.WriteFile(p, []byte(log), 0o600); err != nil {
		t.Fatal(err)
	}
	got := reloadsIn(p)
	if len(got) != 1 || got["s1-cfg2"] != "2" {
		t.Fatalf("reloads: %v", got)
	}
}
