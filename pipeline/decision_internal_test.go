package pipeline

import (
	"strings"
	"testing"

	"github.com/writ-dev/writ/kv"
	"github.com/writ-dev/writ/schema/ir"
)

// TestCheckerRefusesMachineWriteOfDeclinedEntry: at apply, a command the
// proposer quarantined or rejected (the handler declined it) carries no
// applying transition, so a replica refuses any machine record write in it:
// the transition the proposer left out cannot be applied anywhere.
func TestCheckerRefusesMachineWriteOfDeclinedEntry(t *testing.T) {
	c := &Checker{cat: nil}
	c.machines.Store(&[]namedMachine{{name: "job", m: testJob}})
	state := mapReader{"_m/job/j1": {Key: "_m/job/j1", Value: []byte(`{"state":"RUNNING","order":1}`), Rev: 7}}
	conflict := kv.Write{Key: ConflictKey("job", "j1"), Value: []byte(`{}`), IfRev: 0}
	machine := kv.Write{Key: "_m/job/j1", Value: []byte(`{"state":"COMPLETED","order":2}`), IfRev: 7}
	for _, tc := range []struct {
		name    string
		verdict Verdict
		writes  []kv.Write
		veto    string
	}{
		{"quarantine writes its case", VerdictQuarantine, []kv.Write{conflict}, ""},
		{"quarantine also moves the machine", VerdictQuarantine, []kv.Write{conflict, machine}, "without a transition that changes it"},
		{"rejection moves the machine", VerdictReject, []kv.Write{machine}, "must not write"},
	} {
		cmd := kv.Command{ID: "fact:job.state_report:r2", Type: "job.state_report", Class: uint8(ir.ClassFact), Key: "j1",
			Verdict: uint8(tc.verdict), Guard: (&guardInfo{Reason: "declined"}).appendTo(nil)}
		cmd.Effect.Writes = tc.writes
		err := c.Check(&cmd, state)
		switch {
		case tc.veto == "" && err != nil:
			t.Errorf("%s: vetoed: %v", tc.name, err)
		case tc.veto != "" && (err == nil || !strings.Contains(err.Error(), tc.veto)):
			t.Errorf("%s: want a veto naming %q, got %v", tc.name, tc.veto, err)
		}
	}
}
