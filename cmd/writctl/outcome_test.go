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
