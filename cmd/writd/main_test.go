package main

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestBadInputOneLine: bad configuration and occupied ports stop writd
// before anything starts, with one line naming the problem and the fix, and
// nothing written to the data directory.
func TestBadInputOneLine(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.3.30:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "writ.yaml")
	if err := os.WriteFile(cfg, []byte("api:\n  adress: 127.0.0.1:1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	if err := os.Mkdir(data, 0o700); err != nil {
		t.Fatal(err)
	}
	base := []string{"--data-dir", data, "--raft-addr", "127.0.3.30:7071", "--gossip-addr", "127.0.3.30:7072"}
	trueBin := pinned(t, "/bin/true") // past the plugins check (docs/security.md)
	for _, c := range []struct {
		name string
		args []string
		env  []string
		want []string
	}{
		{"unknown flag", []string{"--api-adress", "x"}, nil, []string{"unknown flag: --api-adress"}},
		{"unknown file key", []string{"--config", cfg}, nil, []string{"api.adress", "unknown key"}},
		{"unknown env", nil, []string{"WRIT_NODE_NAME=x"}, []string{"WRIT_NODE_NAME", "unknown variable"}},
		{"bad duration", []string{"--pipeline-commit-timeout", "soon"}, nil, []string{"pipeline.commit_timeout", "not a duration"}},
		{"bad port", []string{"--api-addr", "127.0.0.1:70000"}, nil, []string{"api.addr", "65535"}},
		{"bad metrics port", []string{"--metrics-addr", "127.0.0.1:70000"}, nil, []string{"metrics.addr", "65535"}},
		{"bad pprof switch", []string{"--metrics-addr", "127.0.0.1:0"}, []string{"WRIT_DEBUG_PPROF=maybe"}, []string{"debug.pprof"}},
		{"port in use", append([]string{"--api-addr", busy.Addr().String(), "--plugin", trueBin}, base...), nil, []string{"api.addr", "address already in use", "set api.addr"}},
		{"raft port in use", []string{"--data-dir", data, "--api-addr", "127.0.3.30:0", "--raft-addr", busy.Addr().String(), "--gossip-addr", "127.0.3.30:7072", "--plugin", trueBin}, nil, []string{"raft.addr", "address already in use"}},
		{"missing plugin", []string{"--plugin", filepath.Join(dir, "nope")}, nil, []string{"plugins", "no such file", "--plugin"}},
		{"removed jobs flag", []string{"--plugins-jobs", "/bin/true"}, nil, []string{"unknown flag: --plugins-jobs"}},
		{"bad plugin checksum", []string{"--plugin", "/bin/true=abc"}, nil, []string{"plugins", "64 hexadecimal", "PATH=SHA256"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := run(c.args, c.env, &out, &errb)
			msg := strings.TrimSpace(errb.String())
			if code == 0 {
				t.Fatal("writd accepted bad input")
			}
			if strings.Contains(msg, "\n") {
				t.Errorf("not one line: %q", msg)
			}
			for _, w := range c.want {
				if !strings.Contains(msg, w) {
					t.Errorf("%q does not mention %q", msg, w)
				}
			}
		})
	}
	if ents, _ := os.ReadDir(data); len(ents) != 0 {
		t.Fatalf("bad input touched the data directory: %v", ents)
	}
}

// TestPluginChecksumFromConfigRefusesMismatch runs the real writd with the
// real writ-jobs plugin and a configured checksum that does not match: the
// node must refuse the plugin at start, naming it and the checksum.
func TestPluginChecksumFromConfigRefusesMismatch(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs real binaries")
	}
	bin := buildBinaries(t)
	data := t.TempDir()
	wrong := strings.Repeat("0", 64)
	cmd := exec.Command(filepath.Join(bin, "writd"), "--data-dir", data,
		"--api-addr", "127.0.3.29:17070", "--raft-addr", "127.0.3.29:17071", "--gossip-addr", "127.0.3.29:17072",
		"--plugin", filepath.Join(bin, "writ-jobs")+"="+wrong)
	cmd.Env = cleanEnv()
	var errb bytes.Buffer
	cmd.Stderr = &errb
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatalf("writd started with a plugin whose checksum does not match; stderr: %s", errb.String())
		}
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("writd kept running with a mismatched plugin checksum; stderr: %s", errb.String())
	}
	msg := errb.String()
	if !strings.Contains(msg, "writ-jobs") || !strings.Contains(strings.ToLower(msg), "checksum") {
		t.Fatalf("refusal does not name the plugin and the checksum: %q", msg)
	}
}
