package compat_test

import (
	"strings"
	"testing"

	"github.com/writ-dev/writ/internal/depcheck"
)

// TestImportRules: writd links compat, so it stays on the standard library
// and schema/ir (no CUE, no network).
func TestImportRules(t *testing.T) {
	const pkg = "github.com/writ-dev/writ/schema/compat"
	deps, err := depcheck.Deps(pkg, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range deps {
		first, _, _ := strings.Cut(d, "/")
		if d == pkg || !strings.Contains(first, ".") || d == "github.com/writ-dev/writ/schema/ir" {
			continue
		}
		t.Errorf("%s must import only the standard library and schema/ir; found %s", pkg, d)
	}
}
