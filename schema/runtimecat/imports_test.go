package runtimecat_test

import (
	"os"
	"strings"
	"testing"

	"github.com/writ-dev/writ/internal/depcheck"
)

// TestImportRules: the runtime catalog is linked into every writd, so it
// stays on the standard library, schema/ir and schema/jsonscan (no CUE on
// the request path).
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
		if d == pkg || std || d == "github.com/writ-dev/writ/schema/ir" || d == "github.com/writ-dev/writ/schema/jsonscan" {
			continue
		}
		t.Errorf("%s must import only the standard library, schema/ir and schema/jsonscan; found %s in its dependency closure", pkg, d)
	}
	depcheck.Forbid(t, pkg, "cuelang.org/go", "github.com/writ-dev/writ/pipeline", "github.com/writ-dev/writ/schema/load", "github.com/writ-dev/writ/schema/gen")
}

func readAfter(t *testing.T, path, clause string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(b), clause)
	if !ok {
		t.Fatalf("%s has no %q", path, clause)
	}
	return after
}

// TestPatternCompilerIsTheGenerated keeps pattern.go's DFA compiler
// identical to the one writ gen uses.
func TestPatternCompilerIsTheGenerated(t *testing.T) {
	section := func(path string) string {
		s := readAfter(t, path, "\n// Patterns anchored at both ends")
		if i := strings.Index(s, "\n// emitMatcher writes"); i >= 0 {
			s = s[:i]
		}
		return strings.TrimSpace(s)
	}
	if section("pattern.go") != section("../gen/pattern.go") {
		t.Fatal("pattern.go differs from schema/gen/pattern.go between \"Patterns anchored\" and emitMatcher (fix: copy that section again)")
	}
}
