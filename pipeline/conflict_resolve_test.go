package pipeline

import (
	"fmt"
	"strings"
	"testing"
)

// A case keeps every observation's entry ID, the newest MaxObservations,
// and the latest incoming payload; the same entry again changes nothing.
func TestConflictObservationsBounded(t *testing.T) {
	c := ConflictCase{Machine: "job", Instance: "j1", Current: "COMPLETED", Incoming: "RUNNING", Reason: "illegal"}
	var cur *ConflictCase
	for i := range MaxObservations + 5 {
		c.EntryID, c.Payload = fmt.Sprintf("r%d", i), []byte(fmt.Sprintf(`{"n":%d}`, i))
		next, err := nextConflict(cur, c)
		if err != nil || next == nil {
			t.Fatalf("observation %d: %v %v", i, next, err)
		}
		cur = next
		if again, err := nextConflict(cur, c); err != nil || again != nil {
			t.Fatalf("same entry %d again: %v %v", i, again, err)
		}
	}
	if len(cur.Observations) != MaxObservations || cur.Observations[0].EntryID != "r5" || cur.Observations[MaxObservations-1].EntryID != fmt.Sprintf("r%d", MaxObservations+4) {
		t.Fatalf("observations: %+v", cur.Observations)
	}
	if string(cur.Payload) != fmt.Sprintf(`{"n":%d}`, MaxObservations+4) || cur.Revision != 1 {
		t.Fatalf("payload %s revision %d", cur.Payload, cur.Revision)
	}
}

func TestParseConflictKey(t *testing.T) {
	for _, k := range []string{"_conflict/job/j1", "job/j1"} {
		if m, i, err := ParseConflictKey(k); err != nil || m != "job" || i != "j1" {
			t.Fatalf("%s: %s %s %v", k, m, i, err)
		}
	}
	for _, k := range []string{"", "job", "_conflict/job/", "/j1"} {
		if _, _, err := ParseConflictKey(k); err == nil || !strings.Contains(err.Error(), "want _conflict/<machine>/<instance>") {
			t.Fatalf("%q: %v", k, err)
		}
	}
}
