package patterndfa

import (
	"testing"

	"github.com/writ-dev/writ/internal/depcheck"
)

// TestImportRules: the compiler is linked into writd (through the runtime
// catalog) and into writ gen, so it stays on the standard library.
func TestImportRules(t *testing.T) {
	depcheck.Forbid(t, "github.com/writ-dev/writ/schema/patterndfa", "github.com/", "golang.org/x", "google.golang.org", "cuelang.org", "go.etcd.io")
}
