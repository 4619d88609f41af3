package wire_test

import (
	"testing"

	"github.com/writ-dev/writ/internal/depcheck"
)

// TestImportRules: every generated package and the runtime catalog link
// this package into plugins and nodes, so it stays on the standard
// library, schema/ir and schema/jsonscan.
func TestImportRules(t *testing.T) {
	depcheck.StdlibAnd(t, "github.com/writ-dev/writ/schema/wire",
		"github.com/writ-dev/writ/schema/ir", "github.com/writ-dev/writ/schema/jsonscan")
}
