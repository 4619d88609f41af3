package client

import "testing"

// TestStatusStrings pins the names the client prints (the wire enum's
// names); they come from the constants' line comments (stringer).
func TestStatusStrings(t *testing.T) {
	for s, want := range map[Status]string{
		Uncertain: "UNCERTAIN", Committed: "COMMITTED", Rejected: "REJECTED",
		Unavailable: "UNAVAILABLE", NotCommitted: "NOT_COMMITTED",
	} {
		if got := s.String(); got != want {
			t.Errorf("Status %d prints %q, want %q", int(s), got, want)
		}
	}
}
