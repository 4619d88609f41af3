package leasesgen

import (
	"testing"

	"github.com/writ-dev/writ/internal/depcheck"
)

// The generated leases package must not drag CUE or runtime packages into
// plugins and nodes.
func TestGeneratedCodeHasNoCUE(t *testing.T) {
	depcheck.Forbid(t, "github.com/writ-dev/writ/examples/leases/leasesgen", "cuelang.org/go",
		"github.com/writ-dev/writ/pipeline", "github.com/writ-dev/writ/raftstore", "github.com/writ-dev/writ/membership",
		"github.com/writ-dev/writ/plugins", "github.com/writ-dev/writ/api")
}
