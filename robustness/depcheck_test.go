package robustness

import (
	"testing"

	"github.com/writ-dev/writ/internal/depcheck"
)

// TestImportRules: the suite sees a cluster only through writd processes,
// their logs and the client API, never through the consensus, membership or
// writd packages it tests (node/config, the configuration document rules
// the conformance generator shares, is the one node package it links).
func TestImportRules(t *testing.T) {
	depcheck.Forbid(t, "github.com/writ-dev/writ/robustness",
		"github.com/writ-dev/writ/raftstore", "github.com/writ-dev/writ/membership", "github.com/writ-dev/writ/cmd",
		"github.com/writ-dev/writ/node/schemadir", "github.com/writ-dev/writ/metrics")
}
