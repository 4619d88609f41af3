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
