package gen_test

import (
	"testing"

	"github.com/writ-dev/writ/internal/depcheck"
)

func TestImportRules(t *testing.T) {
	depcheck.Forbid(t, "github.com/writ-dev/writ/schema/gen", "cuelang.org/go",
		"github.com/writ-dev/writ/pipeline", "github.com/writ-dev/writ/raftstore", "github.com/writ-dev/writ/membership", "github.com/writ-dev/writ/plugins", "github.com/writ-dev/writ/api", "github.com/writ-dev/writ/schema/load",
		"go.etcd.io", "github.com/hashicorp", "google.golang.org/grpc", "github.com/spf13")
}

// generated lists the module's packages that writ gen wrote.
var generated = []string{
	"github.com/writ-dev/writ/examples/jobs/jobsgen",
	"github.com/writ-dev/writ/examples/leases/leasesgen",
	"github.com/writ-dev/writ/internal/cyclic/cyclicgen",
	"github.com/writ-dev/writ/cmd/writd/testdata/lease/leasegen",
	"github.com/writ-dev/writ/schema/runtimecat/internal/rolloutgen",
}

// TestGeneratedImports: generated code is linked into plugins and nodes, so
// it imports only the standard library, schema/ir and its runtime,
// schema/wire (with schema/jsonscan under it): no CUE, no runtime package.
func TestGeneratedImports(t *testing.T) {
	for _, pkg := range generated {
		depcheck.StdlibAnd(t, pkg, "github.com/writ-dev/writ/schema/ir",
			"github.com/writ-dev/writ/schema/wire", "github.com/writ-dev/writ/schema/jsonscan")
	}
}
