package pipeline_test

import (
	"testing"

	"github.com/writ-dev/writ/internal/depcheck"
)

func TestImportRules(t *testing.T) {
	depcheck.Forbid(t, "github.com/writ-dev/writ/pipeline",
		"go.etcd.io", "github.com/hashicorp", "google.golang.org", "github.com/spf13", "cuelang.org",
		"github.com/writ-dev/writ/raftstore", "github.com/writ-dev/writ/membership",
		"github.com/writ-dev/writ/plugins", "github.com/writ-dev/writ/api", "github.com/writ-dev/writ/schema/load")
	depcheck.Forbid(t, "github.com/writ-dev/writ/pipeline/pipelinetest",
		"github.com/writ-dev/writ/raftstore", "github.com/writ-dev/writ/membership", "github.com/writ-dev/writ/plugins/host")
}

// TestOnlyStdlibKVAndIR: besides the standard library, pipeline may import
// only kv, schema/ir and internal/backoff (stdlib-only itself:
// internal/backoff.TestOnlyStdlib).
func TestOnlyStdlibKVAndIR(t *testing.T) {
	depcheck.StdlibAnd(t, "github.com/writ-dev/writ/pipeline", "github.com/writ-dev/writ/kv",
		"github.com/writ-dev/writ/schema/ir", "github.com/writ-dev/writ/internal/backoff")
}
