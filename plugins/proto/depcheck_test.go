package pluginproto_test

import (
	"testing"

	"github.com/writ-dev/writ/internal/depcheck"
)

// TestImportRules enforces DESIGN.md: plugins/proto imports nothing in the module.
func TestImportRules(t *testing.T) {
	depcheck.Forbid(t, "github.com/writ-dev/writ/plugins/proto", "github.com/writ-dev/writ")
}
