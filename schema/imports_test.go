package schema_test

import (
	"testing"

	"github.com/writ-dev/writ/internal/depcheck"
)

// The meta-schema package imports no Go package of the module.
func TestImportRules(t *testing.T) {
	depcheck.Forbid(t, "github.com/writ-dev/writ/schema", "github.com/writ-dev/writ", "cuelang.org/go")
}

// The generated jobs package must not drag CUE into plugins and nodes.
func TestGeneratedCodeHasNoCUE(t *testing.T) {
	depcheck.Forbid(t, "github.com/writ-dev/writ/examples/jobs/jobsgen", "cuelang.org/go",
		"github.com/writ-dev/writ/pipeline", "github.com/writ-dev/writ/raftstore", "github.com/writ-dev/writ/membership", "github.com/writ-dev/writ/plugins", "github.com/writ-dev/writ/api")
}
