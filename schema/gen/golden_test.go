package gen_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/writ-dev/writ/schema/gen"
	"github.com/writ-dev/writ/schema/load"
)

var update = flag.Bool("update", false, "rewrite the generated sections of testdata/*.txtar")

type archive struct {
	comment string
	files   []archiveFile
}

type archiveFile struct {
	name string
	data []byte
}

// parseTxtar reads the txtar format: a comment, then "-- name --" sections.
func parseTxtar(b []byte) archive {
	var a archive
	lines := strings.SplitAfter(string(b), "\n")
	cur := -1
	for _, l := range lines {
		t := strings.TrimRight(l, "\n")
		if strings.HasPrefix(t, "-- ") && strings.HasSuffix(t, " --") && len(t) > 6 {
			a.files = append(a.files, archiveFile{name: strings.TrimSpace(t[3 : len(t)-3])})
			cur = len(a.files) - 1
			continue
		}
		if cur < 0 {
			a.comment += l
		} else {
			a.files[cur].data = append(a.files[cur].data, l...)
		}
	}
	return a
}

func formatTxtar(a archive) []byte {
	var b bytes.Buffer
	b.WriteString(a.comment)
	for _, f := range a.files {
		b.WriteString("-- " + f.name + " --\n")
		b.Write(f.data)
	}
	return b.Bytes()
}

// TestGolden: each testdata/*.txtar holds a schema (*.cue) and either the
// generated files (*_gen.go) or the expected error output (stderr).
// Successful goldens must also compile (checked with go build through a
// build overlay, so nothing is written into the source tree).
func TestGolden(t *testing.T) {
	paths, _ := filepath.Glob("testdata/*.txtar")
	if len(paths) == 0 {
		t.Fatal("no goldens")
	}
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			a := parseTxtar(raw)
			var files []load.File
			for _, f := range a.files {
				if strings.HasSuffix(f.name, ".cue") {
					files = append(files, load.File{Name: f.name, Src: f.data})
				}
			}
			res := load.Files(files)
			got := map[string][]byte{}
			if res.Failed() {
				var errb bytes.Buffer
				for _, f := range res.Findings {
					if f.Fails() {
						errb.WriteString(f.String() + "\n")
					}
				}
				got["stderr"] = errb.Bytes()
			} else {
				out, err := gen.Generate(res.Schema, gen.Options{Source: "testdata"})
				if err != nil {
					got["stderr"] = []byte(err.Error() + "\n")
				} else {
					got = out
				}
			}
			var out archive
			out.comment = a.comment
			for _, f := range a.files {
				if strings.HasSuffix(f.name, ".cue") {
					out.files = append(out.files, f)
				}
			}
			names := make([]string, 0, len(got))
			for n := range got {
				names = append(names, n)
			}
			sort.Strings(names)
			for _, n := range names {
				out.files = append(out.files, archiveFile{name: n, data: got[n]})
			}
			want := formatTxtar(out)
			if *update {
				if err := os.WriteFile(path, want, 0o644); err != nil {
					t.Fatal(err)
				}
				raw = want
			}
			if !bytes.Equal(raw, want) {
				t.Fatalf("golden differs (run go test -run TestGolden -update and review the diff):\n%s",
					gen.Diff(path, "got", raw, want))
			}
			if _, failed := got["stderr"]; !failed {
				compile(t, got)
			}
		})
	}
}

func compile(t *testing.T, files map[string][]byte) {
	t.Helper()
	if testing.Short() {
		t.Skip("compiling goldens needs the go tool")
	}
	wd, _ := os.Getwd()
	virtual := filepath.Join(wd, "internal", "goldenbuild")
	tmp := t.TempDir()
	replace := map[string]string{}
	for n, b := range files {
		p := filepath.Join(tmp, n)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		replace[filepath.Join(virtual, n)] = p
	}
	ov, _ := json.Marshal(map[string]any{"Replace": replace})
	ovPath := filepath.Join(tmp, "overlay.json")
	if err := os.WriteFile(ovPath, ov, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "build", "-overlay", ovPath, "./internal/goldenbuild")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("generated golden does not compile: %v\n%s", err, out)
	}
}
