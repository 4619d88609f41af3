package conformance

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestClusterTierWithoutWritd: outside the writ module (no build from
// source) and with no writd next to the executable or on PATH, every
// cluster check is NOT RUN naming the fix, and nothing is built.
func TestClusterTierWithoutWritd(t *testing.T) {
	saved := buildWritdFromSource
	buildWritdFromSource = false
	t.Cleanup(func() { buildWritdFromSource = saved })
	t.Setenv("PATH", t.TempDir())
	rep := mustRun(t, Options{SchemaDir: leasesSchema, PluginPath: "writ-leases", Only: []Tier{TierCluster}})
	n := 0
	for _, c := range rep.Checks {
		if c.Tier != TierCluster {
			continue
		}
		n++
		if c.Result != NotRun || !strings.Contains(c.Reason, "no writd binary next to writ or on PATH") || !strings.Contains(c.Reason, "--writd BIN") {
			t.Errorf("%s: %s %q, want NOT RUN naming the missing writd and --writd", c.ID, c.Result, c.Reason)
		}
	}
	if n == 0 {
		t.Fatal("no cluster check in the report")
	}
}

// TestWritdBinaryResolution: --writd wins and must be a file; a writd on
// PATH is found; the nodes get --schema and one --plugin per plugin.
func TestWritdBinaryResolution(t *testing.T) {
	saved := buildWritdFromSource
	buildWritdFromSource = false
	t.Cleanup(func() { buildWritdFromSource = saved })
	dir := t.TempDir()
	bin := filepath.Join(dir, "writd")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir)
	pa, pb := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	for _, p := range []string{pa, pb} {
		if err := os.WriteFile(p, []byte("#!/bin/sh\n# "+p+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	e := &Env{Dir: "schema", Opts: Options{PluginPath: pa, Cluster: ClusterOptions{Plugins: []string{pb}}}}
	got, err := e.writdBinary(context.Background(), t.TempDir())
	if err != nil || got != bin {
		t.Fatalf("PATH lookup: %q, %v; want %q", got, err, bin)
	}
	e.Opts.Cluster.Writd = filepath.Join(dir, "missing")
	if _, err := e.writdBinary(context.Background(), t.TempDir()); err == nil || !strings.Contains(err.Error(), "--writd") {
		t.Fatalf("missing --writd: %v", err)
	}
	args, err := e.writdArgs()
	if err != nil {
		t.Fatal(err)
	}
	var flags []string
	for i := 0; i < len(args); i += 2 {
		flags = append(flags, args[i]+" "+filepath.Base(args[i+1]))
	}
	// each plugin pinned by the sha256 of the binary (a configured writd
	// refuses an unpinned one)
	want := "--schema schema,--plugin a=" + sha256Hex(t, pa) + ",--plugin b=" + sha256Hex(t, pb)
	if strings.Join(flags, ",") != want {
		t.Fatalf("writd args %v, want %s", flags, want)
	}
	e.Opts.PluginPath = filepath.Join(dir, "missing")
	if _, err := e.writdArgs(); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("a missing plugin binary: %v", err)
	}
}

func sha256Hex(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
