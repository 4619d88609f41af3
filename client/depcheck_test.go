package client

import (
	"testing"

	"github.com/writ-dev/writ/internal/depcheck"
)

// TestImportRules: the client is the public API of a remote cluster; it
// must not drag any server-side package into a program that uses it.
func TestImportRules(t *testing.T) {
	depcheck.Forbid(t, "github.com/writ-dev/writ/client",
		"github.com/writ-dev/writ/pipeline", "github.com/writ-dev/writ/raftstore",
		"github.com/writ-dev/writ/membership", "github.com/writ-dev/writ/node", "github.com/writ-dev/writ/kv",
		"github.com/writ-dev/writ/plugins", "github.com/writ-dev/writ/schema", "github.com/writ-dev/writ/examples",
		"go.etcd.io", "github.com/hashicorp", "cuelang.org", "github.com/spf13")
}
