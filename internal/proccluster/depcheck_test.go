package proccluster

import (
	"testing"

	"github.com/writ-dev/writ/internal/depcheck"
)

// TestImportRules: the harness sees a node only as a process, its log and
// its client API; of this module it links the API types, procenv and the
// plugin pinning of node/config, never the consensus, membership, pipeline
// or writd packages its callers test.
func TestImportRules(t *testing.T) {
	depcheck.Only(t, "github.com/writ-dev/writ/internal/proccluster", "github.com/writ-dev/writ",
		"github.com/writ-dev/writ/api/writv1", "github.com/writ-dev/writ/internal/procenv",
		"github.com/writ-dev/writ/node/config", "github.com/writ-dev/writ/pki")
}
