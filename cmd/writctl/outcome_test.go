package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/writ-dev/writ/api/writv1"
)

// TestOutcomeExitCodes: every outcome a server can return maps to its own
// exit code, and NOT_COMMITTED says the operation may be submitted again
// with a new ID.
func TestOutcomeExitCodes(t *testing.T) {
	for _, c := range []struct {
		o    writv1.Outcome
		code int
		says string
	}{
		{writv1.Outcome_REJECTED, exitRejected, "REJECTED"},
		{writv1.Outcome_UNAVAILABLE, exitUnavailable, "nothing was appended"},
		{writv1.Outcome_UNCERTAIN, exitUncertain, "writctl outcome r1"},
		{writv1.Outcome_NOT_COMMITTED, exitNotCommitted, "submit it again, with a new request ID"},
	} {
		err := outcomeErr(&writv1.OutcomeDetail{Outcome: c.o, RequestId: "r1", Reason: "why"})
		var ee *exitErr
		if !errors.As(err, &ee) || ee.code != c.code || !strings.Contains(ee.msg, c.says) {
			t.Errorf("%s: want exit %d saying %q, have %v", c.o, c.code, c.says, err)
		}
	}
}

// TestReportUncertainNamesTheFactLookup: a fact answered UNCERTAIN (its
// outbox record may be on disk) is looked up by its command ID and
// reported again with the same fact ID; a report's other outcomes read as
// any command's.
func TestReportUncertainNamesTheFactLookup(t *testing.T) {
	a := &app{factType: "worker.usage"}
	var ee *exitErr
	err := a.outcomeErr(&writv1.OutcomeDetail{Outcome: writv1.Outcome_UNCERTAIN, RequestId: "u6", Reason: "why"})
	if !errors.As(err, &ee) || ee.code != exitUncertain || !strings.Contains(ee.msg, "UNCERTAIN fact u6: why") ||
		!strings.Contains(ee.msg, "writctl outcome fact:worker.usage:u6") || !strings.Contains(ee.msg, "--id u6") {
		t.Fatalf("UNCERTAIN fact: %v", err)
	}
	err = a.outcomeErr(&writv1.OutcomeDetail{Outcome: writv1.Outcome_UNAVAILABLE, RequestId: "u7", Reason: "why"})
	if !errors.As(err, &ee) || ee.code != exitUnavailable || !strings.Contains(ee.msg, "nothing was appended") {
		t.Fatalf("UNAVAILABLE fact: %v", err)
	}
}
