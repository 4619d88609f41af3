package schema_test

import (
	"testing"

	"github.com/writ-dev/writ/internal/depcheck"
)

// The meta-schema package imports no Go package of the module.
func TestImportRules(t *testing.T) {
	depcheck.Forbid(t, "github.com/writ-dev/writ/schema", "github.com/writ-dev/writ", "cuelang.org/go")
}
