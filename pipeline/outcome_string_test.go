package pipeline

import "testing"

// TestStatusAndVerdictStrings pins the names outcomes and verdicts carry in
// replies, watch events, traces and logs; they come from the constants'
// line comments (go generate, stringer).
func TestStatusAndVerdictStrings(t *testing.T) {
	for s, want := range map[Status]string{
		StatusCommitted: "COMMITTED", StatusRejected: "REJECTED", StatusUnavailable: "UNAVAILABLE",
		StatusUncertain: "UNCERTAIN", StatusNotCommitted: "NOT_COMMITTED",
	} {
		if got := s.String(); got != want {
			t.Errorf("Status %d prints %q, want %q", uint8(s), got, want)
		}
	}
	for v, want := range map[Verdict]string{
		VerdictNone: "none", VerdictApply: "apply", VerdictDuplicate: "duplicate", VerdictStale: "stale",
		VerdictReject: "reject", VerdictQuarantine: "quarantine", VerdictOverride: "override",
	} {
		if got := v.String(); got != want {
			t.Errorf("Verdict %d prints %q, want %q", uint8(v), got, want)
		}
	}
}
