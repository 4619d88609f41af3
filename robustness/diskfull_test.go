package robustness

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestTmpfsDirFillsAndRestores: a directory moved onto a real tmpfs keeps
// its data, refuses a write beyond the space left with ENOSPC, takes it
// once grown, and is back on the disk with everything written once
// restored.
func TestTmpfsDirFillsAndRestores(t *testing.T) {
	if err := diskFullAvailable(); err != nil {
		t.Skipf("disk-full NOT RUN: %v", err)
	}
	dir := filepath.Join(t.TempDir(), "n1")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "kept"), []byte("before"), 0o600); err != nil {
		t.Fatal(err)
	}
	m := &tmpfsDir{dir: dir}
	defer func() { _ = m.restore() }()
	free, err := m.mount(16 << 10)
	if err != nil {
		t.Fatal(err)
	}
	if free < 8<<10 || free > 64<<10 {
		t.Fatalf("free after mount: %d", free)
	}
	big := bytes.Repeat([]byte("x"), 256<<10)
	if err := os.WriteFile(filepath.Join(dir, "big"), big, 0o600); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("a write beyond the space left: %v", err)
	}
	if err := m.grow(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "big"), big, 0o600); err != nil {
		t.Fatalf("after grow: %v", err)
	}
	if err := m.restore(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile("/proc/self/mounts"); strings.Contains(string(b), dir) {
		t.Fatal("the tmpfs is still mounted")
	}
	for name, want := range map[string]int{"kept": 6, "big": len(big)} {
		if st, err := os.Stat(filepath.Join(dir, name)); err != nil || st.Size() != int64(want) {
			t.Fatalf("%s after restore: %v %v", name, st, err)
		}
	}
}

// TestDiskFullCheck_FakeFaults: disk-full-recovers fails on a crash exit
// and on a node that did not recover, and passes on exit 1 or a start
// refused for lack of space.
func TestDiskFullCheck_FakeFaults(t *testing.T) {
	ok := []Fault{
		{Kind: DiskFull, DiskFull: &DiskFullFault{Node: "n1", Stopped: true, ExitCode: 1, Recovered: true}},
		{Kind: DiskFull, DiskFull: &DiskFullFault{Node: "n2", Stopped: true, ExitCode: 2, Said: "writd: data_dir x: write y: no space left on device", Recovered: true}},
		{Kind: DiskFull, DiskFull: &DiskFullFault{Node: "n3", Full: true, Recovered: true}},
	}
	if r := checkDiskFull(ok); !r.Pass || r.Cases != 3 {
		t.Fatalf("nodes that stopped cleanly failed: %+v", r)
	}
	bad := []Fault{
		{Kind: DiskFull, DiskFull: &DiskFullFault{Node: "n1", Stopped: true, ExitCode: 3, Recovered: true}},
		{Kind: DiskFull, DiskFull: &DiskFullFault{Node: "n2", Stopped: true, ExitCode: 1, Recovery: "not ready"}},
	}
	r := checkDiskFull(bad)
	if r.Pass || r.Failures != 2 || !strings.Contains(r.Detail[0], "code 3") || !strings.Contains(r.Detail[1], "did not become ready") {
		t.Fatalf("a crash exit and a node that did not recover passed: %+v", r)
	}
}
