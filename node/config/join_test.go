package config

import (
	"fmt"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// TestEmptyJoinIsAnError: every way of setting join to nothing is refused
// with one line naming the key and both fixes, never an implied bootstrap.
func TestEmptyJoinIsAnError(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name string
		o    func() Options
		src  string
	}{
		{"flag empty", func() Options { return Options{Flags: flags(t, "--data-dir", dir, "--join", "")} }, "flag --join"},
		{"flag comma", func() Options { return Options{Flags: flags(t, "--data-dir", dir, "--join", ",")} }, "flag --join"},
		{"flag spaces", func() Options { return Options{Flags: flags(t, "--data-dir", dir, "--join", " , ")} }, "flag --join"},
		{"env empty", func() Options { return Options{Env: []string{"WRIT_DATA_DIR=" + dir, "WRIT_JOIN="}} }, "env WRIT_JOIN"},
		{"env comma", func() Options { return Options{Env: []string{"WRIT_DATA_DIR=" + dir, "WRIT_JOIN= , ,"}} }, "env WRIT_JOIN"},
		{"file empty string", func() Options { return Options{File: write(t, "w.yaml", "data_dir: "+dir+"\njoin: [\"\"]\n")} }, "file "},
		{"file empty list", func() Options { return Options{File: write(t, "w.yaml", "data_dir: "+dir+"\njoin: []\n")} }, "file "},
		{"file empty scalar", func() Options { return Options{File: write(t, "w.yaml", "data_dir: "+dir+"\njoin: \"\"\n")} }, "file "},
		{"toml empty", func() Options { return Options{File: write(t, "w.toml", "data_dir = \""+dir+"\"\njoin = [\" \"]\n")} }, "file "},
		{"flag empty with bootstrap", func() Options { return Options{Flags: flags(t, "--data-dir", dir, "--bootstrap", "--join", "")} }, "flag --join"},
		{"temp dir", func() Options { return Options{Flags: flags(t, "--join", "")} }, "flag --join"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n, err := Load(c.o())
			if err == nil {
				t.Fatalf("accepted (bootstrap=%v join=%q): an empty join must not found a new cluster", n.Bootstrap, n.Join)
			}
			msg := err.Error()
			for _, w := range []string{"config: join (" + c.src, "lists no address", "--bootstrap", "flag --join, env WRIT_JOIN"} {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q lacks %q", msg, w)
				}
			}
			if strings.Contains(msg, "\n") {
				t.Errorf("error is not one line: %q", msg)
			}
		})
	}
}

// TestTempDirNeverJoins: a node without data_dir (a temporary directory)
// refuses seeds from any source, in one line naming data_dir as the fix.
func TestTempDirNeverJoins(t *testing.T) {
	for name, o := range map[string]Options{
		"flag": {Flags: flags(t, "--join", "127.0.21.5:7072")},
		"env":  {Env: []string{"WRIT_JOIN=127.0.21.5:7072,127.0.21.6:7072"}},
		"file": {File: write(t, "w.yaml", "join: [\"127.0.21.5:7072\"]\n")},
	} {
		t.Run(name, func(t *testing.T) {
			n, err := Load(o)
			if err == nil {
				t.Fatalf("a temporary-dir node was allowed to join %q", n.Join)
			}
			if msg := err.Error(); !strings.Contains(msg, "config: join") || !strings.Contains(msg, "cannot join a cluster as a voter") || !strings.Contains(msg, "set data_dir") {
				t.Errorf("error %q does not name join, the reason and the fix", msg)
			}
		})
	}
}

// TestBootstrapOnlyWithoutJoin: no join anywhere bootstraps (dev mode or
// the first node); a real seed list joins.
func TestBootstrapOnlyWithoutJoin(t *testing.T) {
	dir := t.TempDir()
	n, err := Load(Options{Flags: flags(t, "--data-dir", dir)})
	if err != nil || !n.Bootstrap || len(n.Join) != 0 {
		t.Fatalf("no join: %+v, %v", n, err)
	}
	n, err = Load(Options{Flags: flags(t, "--data-dir", dir, "--join", ",127.0.21.5:7072,", "--insecure")})
	if err != nil || n.Bootstrap || len(n.Join) != 1 {
		t.Fatalf("one seed among empties: %+v, %v", n, err)
	}
	n, err = Load(Options{Flags: flags(t, "--data-dir", dir, "--bootstrap")})
	if err != nil || !n.Bootstrap || n.Dev {
		t.Fatalf("explicit bootstrap: %+v, %v", n, err)
	}
}

// TestJoinListProperty: for any WRIT_JOIN value built from commas, spaces
// and valid seeds, Load joins exactly the seeds when there is at least one
// and refuses the value (never bootstraps) when there is none.
func TestJoinListProperty(t *testing.T) {
	dir := t.TempDir()
	rapid.Check(t, func(rt *rapid.T) {
		parts := rapid.SliceOf(rapid.OneOf(
			rapid.SampledFrom([]string{"", " ", "  ", "\t"}),
			rapid.Custom(func(rt *rapid.T) string {
				return fmt.Sprintf("127.0.21.%d:%d", rapid.IntRange(1, 254).Draw(rt, "host"), rapid.IntRange(1, 65535).Draw(rt, "port"))
			}),
		)).Draw(rt, "parts")
		var seeds []string
		for _, p := range parts {
			if strings.TrimSpace(p) != "" {
				seeds = append(seeds, p)
			}
		}
		val := strings.Join(parts, ",")
		n, err := Load(Options{Env: []string{"WRIT_DATA_DIR=" + dir, "WRIT_JOIN=" + val, "WRIT_INSECURE=true"}})
		if len(seeds) == 0 {
			if err == nil || !strings.Contains(err.Error(), "lists no address") {
				rt.Fatalf("WRIT_JOIN=%q: want the empty-join error, got %v (node %+v)", val, err, n)
			}
			return
		}
		if err != nil {
			rt.Fatalf("WRIT_JOIN=%q: %v", val, err)
		}
		if n.Bootstrap || strings.Join(n.Join, ",") != strings.Join(seeds, ",") {
			rt.Fatalf("WRIT_JOIN=%q: join %q bootstrap %v, want join %q and no bootstrap", val, n.Join, n.Bootstrap, seeds)
		}
	})
}

// TestBootstrapWithJoinIsAnError: asking to found a cluster and to join one
// at once is refused, naming bootstrap and both ways out.
func TestBootstrapWithJoinIsAnError(t *testing.T) {
	dir := t.TempDir()
	for name, o := range map[string]Options{
		"flags": {Flags: flags(t, "--data-dir", dir, "--bootstrap", "--join", "127.0.21.5:7072")},
		"env":   {Env: []string{"WRIT_DATA_DIR=" + dir, "WRIT_BOOTSTRAP=true", "WRIT_JOIN=127.0.21.5:7072"}},
		"file":  {File: write(t, "w.yaml", "data_dir: "+dir+"\nbootstrap: true\njoin: [\"127.0.21.5:7072\"]\n")},
	} {
		n, err := Load(o)
		if err == nil {
			t.Fatalf("%s: bootstrap and join both accepted: %+v", name, n)
		}
		if msg := err.Error(); !strings.Contains(msg, "config: bootstrap (") || !strings.Contains(msg, "drop bootstrap") || !strings.Contains(msg, "drop join") {
			t.Errorf("%s: %q does not name bootstrap and the fixes", name, msg)
		}
	}
	if _, err := Load(Options{Env: []string{"WRIT_DATA_DIR=" + dir, "WRIT_BOOTSTRAP=false", "WRIT_JOIN=127.0.21.5:7072", "WRIT_INSECURE=true"}}); err != nil {
		t.Fatalf("bootstrap=false with join: %v", err)
	}
}
