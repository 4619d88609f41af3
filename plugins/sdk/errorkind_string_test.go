package sdk

import "testing"

// TestErrorKindStrings pins the kind names handler errors print; they come
// from the constants' line comments (stringer).
func TestErrorKindStrings(t *testing.T) {
	for k, want := range map[ErrorKind]string{KindRule: "rule", KindValidation: "validation", KindInternal: "internal"} {
		if got := k.String(); got != want {
			t.Errorf("ErrorKind %d prints %q, want %q", uint8(k), got, want)
		}
	}
}
