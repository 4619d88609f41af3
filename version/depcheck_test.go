package version_test

import (
	"testing"

	"github.com/writ-dev/writ/internal/depcheck"
)

// TestImportRules: version is standard library only, so every binary and
// package may import it.
func TestImportRules(t *testing.T) {
	depcheck.Forbid(t, "github.com/writ-dev/writ/version", "github.com", "go.etcd.io", "google.golang.org", "cuelang.org", "pgregory.net")
}
