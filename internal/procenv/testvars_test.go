package procenv

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// readsWritVar is a read of a WRIT_ variable by name: what a test or tool
// may not do, since WRIT_* is writd's configuration namespace (a user's
// WRIT_X on a node must look like a node setting, and a test's must not).
var (
	readsWritVar   = regexp.MustCompile(`(Getenv|LookupEnv)\("WRIT_`)
	shellReadsWrit = regexp.MustCompile(`\$\{?WRIT_[A-Z]`)
)

// TestTestOnlyVariablesAreWRITTEST: tests, the robustness suite, tools,
// scripts, the Makefile and CI read their own switches as WRITTEST_*, never
// as WRIT_*. (writd and writctl read WRIT_* and WRITCTL_* through their
// configuration loader, not os.Getenv.)
func TestTestOnlyVariablesAreWRITTEST(t *testing.T) {
	root := filepath.Join("..", "..")
	found := scanForWritReads(t, root)
	for _, f := range found {
		t.Errorf("%s reads a WRIT_ variable: name a test-only switch WRITTEST_* (WRIT_* is writd's configuration)", f)
	}
}

func TestTestOnlyVariablesCheckCatchesARead(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "x_test.go"), []byte("package x; import \"os\"; var _ = os.Getenv(\"WRI"+"T_SKIP_BROWSER\")"), 0o644); err != nil {
		t.Fatal(err)
	}
	if found := scanForWritReads(t, dir); len(found) != 1 {
		t.Fatalf("found %v, want the one read in x_test.go", found)
	}
}

func scanForWritReads(t *testing.T, root string) []string {
	t.Helper()
	var found []string
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if name := d.Name(); name == ".git" || name == "node_modules" || name == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		if !testOrTool(rel) {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(b), "\n") {
			re := readsWritVar
			if !strings.HasSuffix(rel, ".go") {
				re = shellReadsWrit
			}
			if re.MatchString(line) && !strings.Contains(line, "WRIT_PLUGIN_") {
				found = append(found, rel+":"+strconv.Itoa(i+1))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

// testOrTool: test files, and the trees and files that only tests and tools
// run. WRIT_PLUGIN_* reads are plugin settings a plugin gets from its node.
func testOrTool(rel string) bool {
	rel = filepath.ToSlash(rel)
	switch {
	case strings.HasSuffix(rel, "_test.go"), rel == "Makefile":
		return true
	case strings.HasPrefix(rel, "robustness/"), strings.HasPrefix(rel, "tools/"), strings.HasPrefix(rel, "scripts/"), strings.HasPrefix(rel, ".ci/"):
		return true
	}
	return false
}
