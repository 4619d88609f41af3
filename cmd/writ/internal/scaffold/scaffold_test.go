package scaffold

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/writ-dev/writ/internal/depcheck"
	"github.com/writ-dev/writ/schema/ir"
	"github.com/writ-dev/writ/schema/load"
)

func TestImportRules(t *testing.T) {
	depcheck.Forbid(t, "github.com/writ-dev/writ/cmd/writ/internal/scaffold",
		"github.com/writ-dev/writ/pipeline", "github.com/writ-dev/writ/raftstore",
		"github.com/writ-dev/writ/membership", "github.com/writ-dev/writ/plugins/host",
		"github.com/spf13/viper", "go.etcd.io", "github.com/hashicorp/serf")
}

// TestWriteProject: the project has every promised file, its schema vets
// clean with one type of each class and a machine, and the options reach
// go.mod.
func TestWriteProject(t *testing.T) {
	root, err := filepath.Abs("../../../..")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "Edge-Fleet")
	files, err := Write(Options{Dir: dir, Module: "corp.example/edge", Replace: root})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"go.mod", "go.sum", ".gitignore", "Makefile", "README.md", "schema/schema.cue",
		"handler/handler.go", "handler/handler_test.go", "cmd/writ-edgefleet/main.go", "scripts/cluster.sh",
		"edgefleetgen/catalog_gen.go", "edgefleetgen/payloads_gen.go"} {
		if !slices.Contains(files, want) {
			t.Errorf("missing %s in %v", want, files)
		}
		if _, err := os.Stat(filepath.Join(dir, want)); err != nil {
			t.Errorf("%s not on disk: %v", want, err)
		}
	}
	mod, _ := os.ReadFile(filepath.Join(dir, "go.mod"))
	for _, want := range []string{"module corp.example/edge\n", "go " + GoVersion + "\n", "require github.com/writ-dev/writ v", "replace github.com/writ-dev/writ => " + filepath.ToSlash(root)} {
		if !strings.Contains(string(mod), want) {
			t.Errorf("go.mod lacks %q:\n%s", want, mod)
		}
	}
	res, err := load.Dir(filepath.Join(dir, "schema"))
	if err != nil || res.Failed() {
		t.Fatalf("scaffolded schema: %v %v", err, res.Findings)
	}
	classes := map[ir.Class]int{}
	for _, e := range res.Schema.Entries {
		classes[e.Class]++
	}
	for _, c := range []ir.Class{ir.ClassRequest, ir.ClassFact, ir.ClassReceipt, ir.ClassConfig} {
		if classes[c] != 1 {
			t.Errorf("%d entries of class %s, want 1", classes[c], c)
		}
	}
	if len(res.Schema.Machines) != 1 {
		t.Errorf("%d machines, want 1", len(res.Schema.Machines))
	}
	if _, ok := res.Schema.Entry("edgefleet.config"); !ok {
		t.Error("no edgefleet.config type")
	}
	if st, err := os.Stat(filepath.Join(dir, "scripts/cluster.sh")); err != nil || st.Mode()&0o111 == 0 {
		t.Errorf("scripts/cluster.sh is not executable: %v", err)
	}
}

// TestWriteRefuses: a non-empty directory, a bad name or module path is
// refused with the fix, and nothing is written.
func TestWriteRefuses(t *testing.T) {
	full := t.TempDir()
	if err := os.WriteFile(filepath.Join(full, "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	fresh := filepath.Join(t.TempDir(), "p")
	for _, o := range []Options{
		{Dir: full},
		{Dir: fresh, Name: "9lives"},
		{Dir: fresh, Name: "has-dash"},
		{Dir: fresh, Module: "bad path"},
		{Dir: fresh, Replace: t.TempDir()},
		{},
	} {
		if _, err := Write(o); err == nil || !strings.Contains(err.Error(), "fix:") {
			t.Errorf("%+v: %v, want a refusal naming the fix", o, err)
		}
	}
	if _, err := os.Stat(fresh); err == nil {
		t.Error("a refused Write created the directory")
	}
}
