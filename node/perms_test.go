package node

import (
	"os"
	"path/filepath"
	"testing"
)

func TestPrivateTree(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	outside := filepath.Join(t.TempDir(), "outside")
	for _, d := range []string{dir, filepath.Join(dir, "raft", "snap")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string]os.FileMode{
		filepath.Join(dir, "a"):                 0o644,
		filepath.Join(dir, "raft", "snap", "b"): 0o755,
		filepath.Join(dir, "private"):           0o600,
		outside:                                 0o644,
	}
	for f, m := range files {
		if os.WriteFile(f, []byte("x"), 0o600) != nil || os.Chmod(f, m) != nil {
			t.Fatal("write", f)
		}
	}
	if os.Chmod(dir, 0o755) != nil || os.Chmod(filepath.Join(dir, "raft"), 0o750) != nil || os.Symlink(outside, filepath.Join(dir, "link")) != nil {
		t.Fatal("setup")
	}
	n, err := privateTree(dir)
	if err != nil || n != 4 {
		t.Fatalf("privateTree: want 4 entries narrowed (data, raft, a, b), got %d, %v", n, err)
	}
	want := map[string]os.FileMode{
		dir:                                     0o700,
		filepath.Join(dir, "raft"):              0o700,
		filepath.Join(dir, "raft", "snap"):      0o700,
		filepath.Join(dir, "a"):                 0o600,
		filepath.Join(dir, "raft", "snap", "b"): 0o700,
		filepath.Join(dir, "private"):           0o600,
		outside:                                 0o644, // a link is never followed out
	}
	for p, m := range want {
		fi, err := os.Stat(p)
		if err != nil || fi.Mode().Perm() != m {
			t.Errorf("%s: want mode %v, got %v (%v)", p, m, fi.Mode().Perm(), err)
		}
	}
	if n, err := privateTree(dir); err != nil || n != 0 {
		t.Fatalf("second pass: want nothing to narrow, got %d, %v", n, err)
	}
}
