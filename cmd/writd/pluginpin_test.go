package main

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/writ-dev/writ/pki"
)

func sha256File(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// pinned is the --plugin value PATH=SHA256 for the binary at path: a
// configured node runs only plugins pinned by sha256 (docs/security.md).
func pinned(t *testing.T, path string) string {
	t.Helper()
	return path + "=" + sha256File(t, path)
}

// TestUnpinnedPluginRefusedRealProcess: a real writd that joins a cluster
// with peer TLS, API TLS and a gossip key refuses to start a plugin whose
// sha256 is not configured — one listed without one (exit 2, one line
// naming plugins and the fix), and writ-jobs found next to writd with no
// plugins configured — before it contacts anyone. A pinned plugin passes
// (the node goes on to join, and fails there: nobody listens on the
// seed); insecure: true lets an unpinned one through with a warning.
func TestUnpinnedPluginRefusedRealProcess(t *testing.T) {
	bin := buildBinaries(t)
	root := t.TempDir()
	ca, certs := filepath.Join(root, "ca"), filepath.Join(root, "certs")
	if _, err := pki.NewCA(ca, "test"); err != nil {
		t.Fatal(err)
	}
	host := "127.0.16.171"
	f, err := pki.IssueNode(ca, certs, "n1", []string{host})
	if err != nil {
		t.Fatal(err)
	}
	k := make([]byte, 32)
	_, _ = rand.Read(k)
	jobs := filepath.Join(bin, "writ-jobs")
	secure := []string{"--node-id", "n1", "--api-addr", host + ":7070", "--raft-addr", host + ":7071", "--gossip-addr", host + ":7072",
		"--join", "127.0.16.172:7072", "--api-tls-cert-file", f.Cert, "--api-tls-key-file", f.Key,
		"--gossip-key-file", keyFile(t, base64.StdEncoding.EncodeToString(k))}
	env := peerTLSEnv(f)
	run := func(t *testing.T, extra ...string) (int, string) {
		t.Helper()
		data := filepath.Join(t.TempDir(), "data")
		if err := os.Mkdir(data, 0o700); err != nil {
			t.Fatal(err)
		}
		code, stdout, stderr := runWritd(t, bin, env, append(append([]string{"--data-dir", data}, secure...), extra...)...)
		return code, stdout + stderr
	}

	t.Run("configured without sha256", func(t *testing.T) {
		code, out := run(t, "--plugin", jobs)
		if code != exitConfig {
			t.Fatalf("exit %d, want %d: %s", code, exitConfig, out)
		}
		line := strings.TrimSpace(out)
		if strings.Count(line, "\n") != 0 {
			t.Fatalf("want one line, got %q", out)
		}
		for _, w := range []string{"plugins", jobs, "no sha256", "sha256sum", "insecure: true"} {
			if !strings.Contains(line, w) {
				t.Errorf("refusal %q lacks %q", line, w)
			}
		}
	})
	t.Run("found next to writd", func(t *testing.T) {
		code, out := run(t)
		if code == 0 || !strings.Contains(out, "plugins: not set") || !strings.Contains(out, jobs) || !strings.Contains(out, "pinned sha256") {
			t.Fatalf("exit %d, want a refusal naming plugins and %s: %s", code, jobs, out)
		}
		if strings.Contains(out, "gossip join") || strings.Contains(out, "raftstore: started") {
			t.Fatalf("the node went on past the refused plugin: %s", out)
		}
	})
	t.Run("pinned", func(t *testing.T) {
		code, out := run(t, "--plugin", jobs+"="+sha256File(t, jobs))
		if strings.Contains(out, "sha256") && strings.Contains(out, "trust") {
			t.Fatalf("a pinned plugin was refused: %s", out)
		}
		if code == 0 || !strings.Contains(out, "127.0.16.172:7072") {
			t.Fatalf("exit %d: want the node past its plugins, failing to join the absent seed: %s", code, out)
		}
	})
	t.Run("insecure allows with a warning", func(t *testing.T) {
		_, out := run(t, "--plugin", jobs, "--insecure")
		if !strings.Contains(out, "not pinned by sha256") || !strings.Contains(out, "127.0.16.172:7072") {
			t.Fatalf("want a warning about the unpinned plugin and the node going on to join: %s", out)
		}
	})
}

// TestUnpinnedPluginRefusedSingleLoopbackNode: a single configured writd
// on loopback — not joining, no wide listener, so no TLS is required — is
// not the zero-configuration dev node either, so it too runs only pinned
// plugins. One listed without a sha256 (flag or file) is refused with one
// line naming plugins and the fix; writ-jobs found next to writd with no
// plugins configured is refused before any port opens; the pinned binary
// starts and serves; --insecure starts an unpinned one with a WARN.
func TestUnpinnedPluginRefusedSingleLoopbackNode(t *testing.T) {
	bin := buildBinaries(t)
	jobs := filepath.Join(bin, "writ-jobs")
	const host = "127.0.26.1"
	addrs := []string{"--api-addr", host + ":7070", "--raft-addr", host + ":7071", "--gossip-addr", host + ":7072"}
	dataDir := func(t *testing.T) string {
		d := filepath.Join(t.TempDir(), "data")
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		return d
	}
	refused := func(t *testing.T, args ...string) string {
		t.Helper()
		data := dataDir(t)
		code, stdout, stderr := runWritd(t, bin, nil, append(append([]string{"--data-dir", data}, addrs...), args...)...)
		if code == 0 {
			t.Fatalf("exit 0: an unpinned plugin was accepted: %s%s", stdout, stderr)
		}
		if ents, _ := os.ReadDir(data); len(ents) != 0 {
			t.Errorf("a refused start wrote to the data directory: %v", ents)
		}
		return strings.TrimSpace(stdout + stderr)
	}
	t.Run("configured without sha256 (flag)", func(t *testing.T) {
		line := refused(t, "--plugin", jobs)
		if strings.Contains(line, "\n") {
			t.Fatalf("want one line, got %q", line)
		}
		for _, w := range []string{"config: plugins (flag --plugin)", jobs + " has no sha256", "not the zero-configuration dev node", "sha256sum " + jobs, "insecure: true"} {
			if !strings.Contains(line, w) {
				t.Errorf("refusal %q lacks %q", line, w)
			}
		}
	})
	t.Run("configured without sha256 (file)", func(t *testing.T) {
		f := filepath.Join(t.TempDir(), "writd.yaml")
		if err := os.WriteFile(f, []byte("plugins:\n  - path: "+jobs+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		line := refused(t, "--config", f)
		if strings.Contains(line, "\n") || !strings.Contains(line, "config: plugins (file "+f+")") || !strings.Contains(line, "has no sha256") {
			t.Fatalf("want one line naming plugins in %s: %q", f, line)
		}
	})
	t.Run("found next to writd", func(t *testing.T) {
		out := refused(t)
		for _, w := range []string{"plugins: not set", jobs, "without a pinned sha256", "--plugin " + jobs + "=HEX"} {
			if !strings.Contains(out, w) {
				t.Errorf("refusal lacks %q: %s", w, out)
			}
		}
		if strings.Contains(out, "raftstore: started") || strings.Contains(out, "writd: started") {
			t.Fatalf("the node went on past the refused plugin: %s", out)
		}
	})
	serve := func(t *testing.T, args ...string) string {
		t.Helper()
		c := &cluster{t: t, bin: bin}
		p := &proc{t: t, name: "n1", host: host, dir: filepath.Join(t.TempDir(), "n1"), args: args}
		c.nodes = []*proc{p}
		t.Cleanup(c.stopAll)
		c.start(p)
		c.waitReady(p, 30*time.Second)
		if _, err := submit(p, "queue.control", `{"queue":"q","action":"create"}`, 10*time.Second); err != nil {
			t.Fatalf("submit through the plugin: %v", err)
		}
		c.stop(p)
		return readLog(t, p)
	}
	t.Run("pinned", func(t *testing.T) {
		if log := serve(t, "--plugin", pinned(t, jobs)); strings.Contains(log, "not pinned") {
			t.Fatalf("a pinned plugin was warned about: %s", log)
		}
	})
	t.Run("insecure allows with a warning", func(t *testing.T) {
		log := serve(t, "--plugin", jobs, "--insecure")
		var warn string
		for _, l := range strings.Split(log, "\n") {
			if strings.Contains(l, "level=WARN") && strings.Contains(l, "not pinned by sha256") && strings.Contains(l, jobs) {
				warn = l
			}
		}
		if warn == "" {
			t.Fatalf("no WARN naming the unpinned %s:\n%s", jobs, log)
		}
	})
}
