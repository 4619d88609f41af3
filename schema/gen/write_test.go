package gen

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWriteIsAllOrNothing(t *testing.T) {
	dir := t.TempDir()
	old := map[string][]byte{"a_gen.go": []byte(Header + "\npackage p\n// v1\n"), "b_gen.go": []byte(Header + "\npackage p\n")}
	if err := Write(dir, old); err != nil {
		t.Fatal(err)
	}
	// The last target is a directory: Write must fail without touching a_gen.go.
	if err := os.Remove(filepath.Join(dir, "b_gen.go")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "c_gen.go"), 0o755); err != nil {
		t.Fatal(err)
	}
	next := map[string][]byte{"a_gen.go": []byte(Header + "\npackage p\n// v2\n"), "c_gen.go": []byte(Header + "\npackage p\n")}
	err := Write(dir, next)
	if err == nil || !strings.Contains(err.Error(), "c_gen.go") {
		t.Fatalf("want an error naming c_gen.go, got %v", err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "a_gen.go"))
	if !strings.Contains(string(b), "v1") {
		t.Fatal("a failed Write changed an existing file")
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.Contains(e.Name(), ".tmp-") {
			t.Fatalf("temporary file left behind: %s", e.Name())
		}
	}
}

func TestWriteRemovesOnlyStaleGeneratedFiles(t *testing.T) {
	dir := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(dir, "old_gen.go"), []byte(Header+"\npackage p\n"), 0o644))
	must(os.WriteFile(filepath.Join(dir, "mine_gen.go"), []byte("package p\n// hand-written, not ours\n"), 0o644))
	must(Write(dir, map[string][]byte{"new_gen.go": []byte(Header + "\npackage p\n")}))
	if _, err := os.Stat(filepath.Join(dir, "old_gen.go")); !os.IsNotExist(err) {
		t.Fatal("stale generated file kept")
	}
	if _, err := os.Stat(filepath.Join(dir, "mine_gen.go")); err != nil {
		t.Fatal("a file without the generated header was removed")
	}
	d, err := Check(dir, map[string][]byte{"new_gen.go": []byte(Header + "\npackage p\n")})
	if err != nil || d != "" {
		t.Fatalf("fresh dir reported stale: %q %v", d, err)
	}
	d, _ = Check(dir, map[string][]byte{"new_gen.go": []byte(Header + "\npackage q\n")})
	if !strings.Contains(d, "-package p") || !strings.Contains(d, "+package q") {
		t.Fatalf("diff: %s", d)
	}
}
