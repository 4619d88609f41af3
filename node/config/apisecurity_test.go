package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSecureByDefault: a node that joins or listens beyond loopback
// without peer TLS, API TLS and a gossip key is refused with one line
// naming the keys and insecure: true; insecure: true records them and
// warns; a loopback bootstrap node and dev mode are unaffected.
func TestSecureByDefault(t *testing.T) {
	dir := t.TempDir()
	for name, args := range map[string][]string{
		"join": {"--data-dir", dir, "--join", "127.0.43.9:7072"},
		"wide": {"--data-dir", dir, "--gossip-addr", "0.0.0.0:7072"},
	} {
		_, err := Load(Options{Flags: flags(t, args...)})
		if err == nil {
			t.Fatalf("%s: loaded without TLS or a gossip key", name)
		}
		msg := err.Error()
		for _, w := range []string{"config: raft.tls.cert_file, api.tls.cert_file, gossip.key_file: not set", "insecure: true", "--insecure"} {
			if !strings.Contains(msg, w) || strings.Contains(msg, "\n") {
				t.Errorf("%s: %q lacks %q", name, msg, w)
			}
		}
		n, err := Load(Options{Flags: flags(t, append(args, "--insecure")...)})
		if err != nil {
			t.Fatalf("%s with --insecure: %v", name, err)
		}
		if !n.Insecure || strings.Join(n.InsecureMissing, ",") != "raft.tls.cert_file,api.tls.cert_file,gossip.key_file" || len(n.Warnings) == 0 || !strings.Contains(n.Warnings[len(n.Warnings)-1], "insecure") {
			t.Errorf("%s with --insecure: insecure %v missing %v warnings %q", name, n.Insecure, n.InsecureMissing, n.Warnings)
		}
	}
	if n, err := Load(Options{Flags: flags(t, "--data-dir", dir)}); err != nil || n.Insecure {
		t.Errorf("loopback bootstrap node: %v (insecure %v)", err, n.Insecure)
	}
	if n, err := Load(Options{}); err != nil || !n.Dev || n.Insecure {
		t.Errorf("dev mode: %v", err)
	}
}

// TestAPISecurityKeys: the API TLS and tokens keys are checked before the
// node starts, one line naming the key and the fix.
func TestAPISecurityKeys(t *testing.T) {
	dir := t.TempDir()
	wide := filepath.Join(dir, "tokens.yaml")
	if err := os.WriteFile(wide, []byte("identities: []\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	junk := filepath.Join(dir, "junk.pem")
	if err := os.WriteFile(junk, []byte("not pem"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--api-tls-cert-file", junk}, "api.tls.key_file (default): not set but api.tls.cert_file is"},
		{[]string{"--api-tls-key-file", junk}, "api.tls.cert_file (default): not set"},
		{[]string{"--api-tls-cert-file", junk, "--api-tls-key-file", junk}, "api.tls.cert_file (flag --api-tls-cert-file): cannot load the key pair"},
		{[]string{"--api-tls-client-ca-file", junk}, "client certificates need a TLS API"},
		{[]string{"--api-tokens-file", wide}, "tokens would cross the network in plaintext"},
		{[]string{"--api-tokens-file", wide, "--insecure"}, "readable or writable by group or others"},
		{[]string{"--api-max-watchers", "0"}, "api.max_watchers (flag --api-max-watchers): 0 is out of range"},
	} {
		_, err := Load(Options{Flags: flags(t, append([]string{"--data-dir", dir}, c.args...)...)})
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: %v, want one line with %q", c.args, err, c.want)
		}
	}
}

// TestPluginPinningOutsideDev: every node but the zero-configuration dev
// node — a single one on loopback with only a flag or a file too — is
// refused an unpinned plugin with one line naming plugins and the fix,
// and must pin a plugin found next to writd (RequirePinnedPlugins); a
// pinned one loads; insecure: true loads an unpinned one with a warning;
// the dev node pins as found.
func TestPluginPinningOutsideDev(t *testing.T) {
	dir := t.TempDir()
	sum := strings.Repeat("0f", 32)
	file := write(t, "n.yaml", "data_dir: "+dir+"\nplugins: [/bin/true]\n")
	for name, o := range map[string]Options{
		"flags": {Flags: flags(t, "--data-dir", dir, "--plugin", "/bin/true")},
		"file":  {File: file},
		"env":   {Env: []string{"WRIT_PLUGINS=/bin/true"}},
	} {
		_, err := Load(o)
		if err == nil {
			t.Fatalf("%s: a loopback node loaded an unpinned plugin", name)
		}
		msg := err.Error()
		for _, w := range []string{"config: plugins", "/bin/true has no sha256", "not the zero-configuration dev node", "sha256sum /bin/true", "insecure: true"} {
			if !strings.Contains(msg, w) || strings.Contains(msg, "\n") {
				t.Errorf("%s: %q lacks %q (or is not one line)", name, msg, w)
			}
		}
	}
	n, err := Load(Options{Flags: flags(t, "--data-dir", dir)})
	if err != nil || n.Dev || !n.RequirePinnedPlugins {
		t.Errorf("loopback node without plugins: %v (dev %v, require pinned %v): a plugin found next to writd would be trusted on first use", err, n.Dev, n.RequirePinnedPlugins)
	}
	if n, err := Load(Options{Flags: flags(t, "--data-dir", dir, "--plugin", "/bin/true="+sum)}); err != nil || !n.RequirePinnedPlugins || n.Plugins[0].SHA256 != sum {
		t.Errorf("pinned plugin: %v %+v", err, n)
	}
	n, err = Load(Options{Flags: flags(t, "--data-dir", dir, "--plugin", "/bin/true", "--insecure")})
	if err != nil || n.RequirePinnedPlugins || len(n.Warnings) == 0 || !strings.Contains(strings.Join(n.Warnings, "\n"), "not pinned by sha256") {
		t.Errorf("--insecure: %v (require pinned %v, warnings %q)", err, n.RequirePinnedPlugins, n.Warnings)
	}
	if n, err := Load(Options{}); err != nil || !n.Dev || n.RequirePinnedPlugins {
		t.Errorf("dev node: %v %+v", err, n)
	}
}
