package kv

import "testing"

// TestStatusStrings pins the names apply outcomes print in logs and traces;
// they come from the constants' line comments (go generate, stringer).
func TestStatusStrings(t *testing.T) {
	for s, want := range map[Status]string{
		StatusApplied: "applied", StatusDuplicate: "duplicate", StatusConflict: "conflict",
		StatusRejected: "rejected", StatusFenced: "fenced",
	} {
		if got := s.String(); got != want {
			t.Errorf("Status %d prints %q, want %q", uint8(s), got, want)
		}
	}
}
