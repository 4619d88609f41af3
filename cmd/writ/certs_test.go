package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/writ-dev/writ/pki"
)

func TestCertsInitNodeClient(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	var out, errb bytes.Buffer
	if code := run([]string{"certs", "init", "--dir", dir, "--name", "prod"}, &out, &errb); code != 0 {
		t.Fatalf("init: %d %s", code, errb.String())
	}
	if code := run([]string{"certs", "node", "n1", "--ca", dir, "--host", " 127.0.0.1, ,n1.local"}, &out, &errb); code != 0 {
		t.Fatalf("node: %d %s", code, errb.String())
	}
	if code := run([]string{"certs", "client", "--ca", dir, "alice", "--role", "read", "--role", "write"}, &out, &errb); code != 0 {
		t.Fatalf("client: %d %s", code, errb.String())
	}
	certs, err := pki.ReadCerts(filepath.Join(dir, "n1.crt"))
	if err != nil {
		t.Fatal(err)
	}
	if id, err := pki.NodeID(certs[0]); id != "n1" || err != nil || len(certs[0].DNSNames) != 1 {
		t.Fatalf("node certificate: %q %v %v", id, err, certs[0].DNSNames)
	}
	certs, _ = pki.ReadCerts(filepath.Join(dir, "alice.crt"))
	if name, roles, _, err := pki.ClientIdentity(certs[0]); name != "alice" || len(roles) != 2 || err != nil {
		t.Fatalf("client certificate: %q %v %v", name, roles, err)
	}
	err = filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s is mode %v: group/world bits set", p, fi.Mode().Perm())
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	// --out defaults to the CA directory; the ID may follow the flags.
	if code := run([]string{"certs", "node", "--ca", dir, "--out", filepath.Join(dir, "n2"), "n2"}, &out, &errb); code != 0 {
		t.Fatalf("node with --out: %d %s", code, errb.String())
	}
	if certs, err := pki.ReadCerts(filepath.Join(dir, "n2", "n2.crt")); err != nil || len(certs[0].IPAddresses) != 1 || len(certs[0].DNSNames) != 1 {
		t.Fatalf("node n2 (default hosts 127.0.0.1 and localhost): %v", err)
	}
	errb.Reset()
	if code := run([]string{"certs", "node", "--ca", dir}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "want exactly one ID") {
		t.Fatalf("node without ID: %d %q", code, errb.String())
	}
	errb.Reset()
	if code := run([]string{"certs", "init", "--dir", dir}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "already exists") {
		t.Fatalf("init over a CA: %d %q", code, errb.String())
	}
}
