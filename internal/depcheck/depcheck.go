// Package depcheck enforces the import rules of DESIGN.md's package table:
// each boundary package keeps a test that lists what it must not import,
// directly or indirectly, and calls Forbid.
package depcheck

import (
	"bytes"
	"fmt"
	"os/exec"
	"strings"
	"testing"
)

// Deps returns the transitive import closure of pkg (including test-only
// imports when withTests is set) as reported by `go list -deps`.
func Deps(pkg string, withTests bool) ([]string, error) {
	args := []string{"list", "-deps"}
	if withTests {
		args = append(args, "-test")
	}
	args = append(args, pkg)
	cmd := exec.Command("go", args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("depcheck: go list %s: %w: %s", pkg, err, errb.String())
	}
	return strings.Fields(out.String()), nil
}

// Forbid fails t if pkg imports, directly or indirectly, any package equal to
// or below one of the forbidden prefixes. Test files are not counted: the
// rules are about what the package drags into a binary.
func Forbid(t testing.TB, pkg string, forbidden ...string) {
	t.Helper()
	deps := closure(t, pkg)
	for _, d := range deps {
		if d == pkg {
			continue
		}
		for _, f := range forbidden {
			if d == f || strings.HasPrefix(d, f+"/") {
				t.Errorf("%s must not import %s (found %s in its dependency closure)", pkg, f, d)
			}
		}
	}
}

// Only fails t if pkg's closure holds a package under within (a module
// path) that is not one of allowed or below one: an allow-list, for a
// package that may link a few of the module's packages and no others.
func Only(t testing.TB, pkg, within string, allowed ...string) {
	t.Helper()
	deps := closure(t, pkg)
next:
	for _, d := range deps {
		if d == pkg || (d != within && !strings.HasPrefix(d, within+"/")) {
			continue
		}
		for _, a := range allowed {
			if d == a || strings.HasPrefix(d, a+"/") {
				continue next
			}
		}
		t.Errorf("%s may import only %v of %s (found %s in its dependency closure)", pkg, allowed, within, d)
	}
}

// StdlibAnd fails t if pkg's closure holds a package outside the standard
// library that is not one of allowed (exact paths): the rule of a package
// that is linked everywhere and so may depend on little.
func StdlibAnd(t testing.TB, pkg string, allowed ...string) {
	t.Helper()
	deps := closure(t, pkg)
next:
	for _, d := range deps {
		first, _, _ := strings.Cut(d, "/")
		if d == pkg || !strings.Contains(first, ".") {
			continue // the package itself, or the standard library
		}
		for _, a := range allowed {
			if d == a {
				continue next
			}
		}
		t.Errorf("%s may import only the standard library and %v (found %s in its dependency closure)", pkg, allowed, d)
	}
}

// closure is Deps(pkg, false), failing t if go list fails or lists
// nothing.
func closure(t testing.TB, pkg string) []string {
	t.Helper()
	deps, err := Deps(pkg, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(deps) == 0 {
		t.Fatalf("depcheck: go list returned no packages for %s", pkg)
	}
	return deps
}
