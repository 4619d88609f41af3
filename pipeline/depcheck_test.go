package pipeline_test

import (
	"strings"
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
// only kv and schema/ir.
func TestOnlyStdlibKVAndIR(t *testing.T) {
	deps, err := depcheck.Deps("github.com/writ-dev/writ/pipeline", false)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range deps {
		first := strings.Split(d, "/")[0]
		if !strings.Contains(first, ".") {
			continue // standard library
		}
		switch d {
		case "github.com/writ-dev/writ/pipeline", "github.com/writ-dev/writ/kv", "github.com/writ-dev/writ/schema/ir",
			"github.com/writ-dev/writ/internal/backoff": // stdlib-only itself (internal/backoff.TestOnlyStdlib)
			continue
		}
		t.Errorf("pipeline imports %s; only the standard library, kv, schema/ir and internal/backoff are allowed", d)
	}
}
