package config

import (
	"bytes"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeMode writes body to a fresh file with mode m (chmod after the write,
// so the umask cannot narrow it).
func writeMode(t *testing.T, name, body string, m os.FileMode) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, m); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestGossipKeyFile(t *testing.T) {
	raw := bytes.Repeat([]byte{0xa5}, 32)
	key := base64.StdEncoding.EncodeToString(raw)
	good := writeMode(t, "gossip.key", key+"\n", 0o600)
	for _, o := range []Options{
		{Flags: flags(t, "--gossip-key-file", good)},
		{Env: []string{"WRIT_GOSSIP_KEY_FILE=" + good}},
		{File: writeMode(t, "w.yaml", "gossip:\n  key_file: "+good+"\n", 0o644)},
	} {
		n, err := Load(o)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(n.GossipKey, raw) {
			t.Fatalf("gossip.key_file: key not read: %x", n.GossipKey)
		}
		for _, w := range n.Warnings {
			if strings.Contains(w, "gossip.key") {
				t.Fatalf("key file 0600: unexpected warning %q", w)
			}
		}
	}

	wantErr := func(o Options, want ...string) {
		t.Helper()
		_, err := Load(o)
		if err == nil {
			t.Fatalf("want an error containing %q, got none", want)
		}
		msg := err.Error()
		if strings.Contains(msg, "\n") || strings.Contains(msg, key) {
			t.Fatalf("error must be one line and never hold the key: %q", msg)
		}
		for _, w := range want {
			if !strings.Contains(msg, w) {
				t.Fatalf("error %q lacks %q", msg, w)
			}
		}
	}
	for _, m := range []os.FileMode{0o640, 0o604, 0o644, 0o660, 0o602, 0o666} {
		wantErr(Options{Flags: flags(t, "--gossip-key-file", writeMode(t, "k", key, m))}, "gossip.key_file", "group or others", m.String(), "chmod 600")
	}
	wantErr(Options{Flags: flags(t, "--gossip-key-file", filepath.Join(t.TempDir(), "none"))}, "gossip.key_file", "cannot read")
	wantErr(Options{Flags: flags(t, "--gossip-key-file", t.TempDir())}, "gossip.key_file", "not a regular file")
	wantErr(Options{Flags: flags(t, "--gossip-key-file", writeMode(t, "k", "c2hvcnQ=", 0o600))}, "gossip.key_file", "16, 24 or 32 bytes")
	wantErr(Options{Flags: flags(t, "--gossip-key-file", writeMode(t, "k", strings.Repeat("A", maxKeyFile+1), 0o600))}, "gossip.key_file", "larger than")
	wantErr(Options{Flags: flags(t, "--gossip-key-file", good, "--gossip-key", key)}, "gossip.key_file", "together with gossip.key")

	// A config file holding the key inline must be private; one without
	// a secret only gets a warning.
	wantErr(Options{File: writeMode(t, "w.yaml", "gossip:\n  key: "+key+"\n", 0o644)}, "gossip.key", "readable by group or others", "chmod 600", "gossip.key_file")
	if n, err := Load(Options{File: writeMode(t, "w.yaml", "gossip:\n  key: "+key+"\n", 0o600)}); err != nil || !bytes.Equal(n.GossipKey, raw) || len(n.Warnings) != 0 {
		t.Fatalf("private config file with the key: %v %v", err, n)
	}
	n, err := Load(Options{File: writeMode(t, "w.yaml", "node:\n  id: a\n", 0o644)})
	if err != nil || len(n.Warnings) != 1 || !strings.Contains(n.Warnings[0], "readable by group or others") {
		t.Fatalf("world-readable config file without a secret: want one warning: %v %+v", err, n)
	}

	// A key on the command line is visible in ps: warned, never echoed.
	n, err = Load(Options{Flags: flags(t, "--gossip-key", key)})
	if err != nil || len(n.Warnings) != 1 || !strings.Contains(n.Warnings[0], "gossip.key_file") || strings.Contains(n.Warnings[0], key) {
		t.Fatalf("key as a flag: want one warning naming gossip.key_file: %v %+v", err, n)
	}
}
