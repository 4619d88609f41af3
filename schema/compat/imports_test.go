package compat_test

import (
	"testing"

	"github.com/writ-dev/writ/internal/depcheck"
)

// TestImportRules: writd links compat, so it stays on the standard library
// and schema/ir (no CUE, no network).
func TestImportRules(t *testing.T) {
	depcheck.StdlibAnd(t, "github.com/writ-dev/writ/schema/compat", "github.com/writ-dev/writ/schema/ir")
}
