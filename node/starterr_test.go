package node

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestOneLineFlattensSeedJoinFailure: the multi-error text serf's join
// returns (as writd printed it before: four lines, "membership:" twice)
// becomes one line with the component named once. The real-process check
// is cmd/writd's TestSeedJoinFailureOneLine.
func TestOneLineFlattensSeedJoinFailure(t *testing.T) {
	serf1 := errors.New("1 error occurred:\n\t* failed to join 127.0.21.9:7072: dial tcp 127.0.21.9:7072: connect: connection refused\n\n")
	one := fmt.Errorf("membership: could not join any seed of [127.0.21.9:7072] after 3 attempts: %w: check the seeds setting", serf1)
	got := oneLine("membership", one)
	want := "membership: could not join any seed of [127.0.21.9:7072] after 3 attempts: failed to join 127.0.21.9:7072: dial tcp 127.0.21.9:7072: connect: connection refused: check the seeds setting"
	if got != want {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
	serf2 := errors.New("2 errors occurred:\n\t* failed to join 127.0.21.9:7072: connection refused\n\t* failed to join 127.0.21.8:7072: i/o timeout\n\n")
	got = oneLine("membership", fmt.Errorf("membership: could not join: %w: fix", serf2))
	if want := "membership: could not join: failed to join 127.0.21.9:7072: connection refused; failed to join 127.0.21.8:7072: i/o timeout: fix"; got != want {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
	if got := oneLine("raft", errors.New("disk full")); got != "raft: disk full" {
		t.Fatalf("plain error: %q", got)
	}
	if got := oneLine("raft", errors.New("raft:\nx")); strings.Contains(got, "\n") {
		t.Fatalf("newline kept: %q", got)
	}
}
