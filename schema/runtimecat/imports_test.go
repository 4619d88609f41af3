package runtimecat_test

import (
	"strings"
	"testing"

	"github.com/writ-dev/writ/internal/depcheck"
)

// TestImportRules: the runtime catalog is linked into every writd, so it
// stays on the standard library, schema/ir, schema/jsonscan and
// schema/patterndfa (no CUE on the request path).
func TestImportRules(t *testing.T) {
	const pkg = "github.com/writ-dev/writ/schema/runtimecat"
	deps, err := depcheck.Deps(pkg, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(deps) == 0 {
		t.Fatal("go list returned no packages")
	}
	for _, d := range deps {
		first, _, _ := strings.Cut(d, "/")
		std := !strings.Contains(first, ".")
		if d == pkg || std || d == "github.com/writ-dev/writ/schema/ir" || d == "github.com/writ-dev/writ/schema/jsonscan" || d == "github.com/writ-dev/writ/schema/patterndfa" {
			continue
		}
		t.Errorf("%s must import only the standard library, schema/ir, schema/jsonscan and schema/patterndfa; found %s in its dependency closure", pkg, d)
	}
	depcheck.Forbid(t, pkg, "cuelang.org/go", "github.com/writ-dev/writ/pipeline", "github.com/writ-dev/writ/schema/load", "github.com/writ-dev/writ/schema/gen")
}
