package metrics_test

import (
	"testing"

	"github.com/writ-dev/writ/internal/depcheck"
)

// TestImportRules: metrics is a leaf. The packages it instruments declare
// the interfaces it implements; it imports none of them, nor the
// consensus, gossip, plugin or configuration libraries.
func TestImportRules(t *testing.T) {
	depcheck.Forbid(t, "github.com/writ-dev/writ/metrics",
		"github.com/writ-dev/writ/pipeline", "github.com/writ-dev/writ/raftstore", "github.com/writ-dev/writ/membership",
		"github.com/writ-dev/writ/plugins", "github.com/writ-dev/writ/api", "github.com/writ-dev/writ/cmd",
		"go.etcd.io", "github.com/hashicorp", "github.com/spf13", "cuelang.org", "google.golang.org/grpc")
}
