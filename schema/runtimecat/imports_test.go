package runtimecat_test

import (
	"testing"

	"github.com/writ-dev/writ/internal/depcheck"
)

// TestImportRules: the runtime catalog is linked into every writd, so it
// stays on the standard library, schema/ir, schema/wire, schema/jsonscan
// and schema/patterndfa (no CUE on the request path).
func TestImportRules(t *testing.T) {
	const pkg = "github.com/writ-dev/writ/schema/runtimecat"
	depcheck.StdlibAnd(t, pkg, "github.com/writ-dev/writ/schema/ir", "github.com/writ-dev/writ/schema/wire",
		"github.com/writ-dev/writ/schema/jsonscan", "github.com/writ-dev/writ/schema/patterndfa")
	depcheck.Forbid(t, pkg, "cuelang.org/go", "github.com/writ-dev/writ/pipeline", "github.com/writ-dev/writ/schema/load", "github.com/writ-dev/writ/schema/gen")
}
