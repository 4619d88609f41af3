package pki

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func mustCA(t *testing.T, name string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), name)
	if _, err := NewCA(dir, name); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestIssueNodeIdentityAndModes(t *testing.T) {
	ca := mustCA(t, "c1")
	out := filepath.Join(t.TempDir(), "certs")
	f, err := IssueNode(ca, out, "n1", []string{"127.0.0.1", "n1.example"})
	if err != nil {
		t.Fatal(err)
	}
	certs, err := ReadCerts(f.Cert)
	if err != nil {
		t.Fatal(err)
	}
	id, err := NodeID(certs[0])
	if err != nil || id != "n1" {
		t.Fatalf("NodeID = %q, %v; want n1", id, err)
	}
	if len(certs[0].IPAddresses) != 1 || len(certs[0].DNSNames) != 1 {
		t.Fatalf("hosts: %v %v", certs[0].IPAddresses, certs[0].DNSNames)
	}
	pool, err := LoadPool(f.CA)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		if err := VerifyChain(pool, certs, u); err != nil {
			t.Fatalf("usage %v: %v", u, err)
		}
	}
	for _, p := range []string{ca, out} {
		if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o700 {
			t.Fatalf("%s mode %v, want 0700", p, fi.Mode().Perm())
		}
	}
	for _, p := range []string{f.Cert, f.Key, filepath.Join(ca, CAKeyFile), filepath.Join(ca, CACertFile)} {
		if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s mode %v, want 0600", p, fi.Mode().Perm())
		}
	}
	if _, err := IssueNode(ca, out, "n1", nil); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("reissue over an existing key: %v", err)
	}
	if _, err := NewCA(ca, "c1"); err == nil {
		t.Fatal("NewCA over an existing CA succeeded")
	}
	if _, err := IssueNode(ca, out, "N 1", nil); err == nil || !strings.Contains(err.Error(), "node ID") {
		t.Fatalf("bad node ID: %v", err)
	}
}

func TestIssueClientRoles(t *testing.T) {
	ca := mustCA(t, "c1")
	f, err := IssueClient(ca, t.TempDir(), "alice", []string{"read", "write:job."})
	if err != nil {
		t.Fatal(err)
	}
	certs, _ := ReadCerts(f.Cert)
	name, roles, node, err := ClientIdentity(certs[0])
	if err != nil || name != "alice" || node || fmt.Sprint(roles) != "[read write:job.]" {
		t.Fatalf("ClientIdentity = %q %v %v %v", name, roles, node, err)
	}
	if _, err := NodeID(certs[0]); err == nil {
		t.Fatal("a client certificate passed as a node")
	}
	pool, _ := LoadPool(f.CA)
	if err := VerifyChain(pool, certs, x509.ExtKeyUsageServerAuth); err == nil {
		t.Fatal("a client certificate verified as a server")
	}
	if _, err := IssueClient(ca, t.TempDir(), "bob", []string{"Bad Role"}); err == nil || !strings.Contains(err.Error(), "role") {
		t.Fatalf("bad role: %v", err)
	}
}

func TestVerifyChainRefusals(t *testing.T) {
	ca, other := mustCA(t, "c1"), mustCA(t, "c2")
	dir := t.TempDir()
	pool, _ := LoadPool(filepath.Join(ca, CACertFile))
	now := time.Now()
	cases := map[string]struct {
		caDir string
		opts  []Option
		want  string
	}{
		"other CA":      {other, nil, "unknown authority"},
		"expired":       {ca, []Option{Validity(now.Add(-2*time.Hour), now.Add(-time.Hour))}, "expired"},
		"not yet valid": {ca, []Option{Validity(now.Add(time.Hour), now.Add(2*time.Hour))}, "not valid before"},
	}
	for name, c := range cases {
		f, err := IssueNode(c.caDir, dir, strings.ReplaceAll(strings.ToLower(name), " ", "-"), nil, c.opts...)
		if err != nil {
			t.Fatal(err)
		}
		certs, _ := ReadCerts(f.Cert)
		if err := VerifyChain(pool, certs, x509.ExtKeyUsageClientAuth); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", name, err, c.want)
		}
	}
}

// handshake runs one mutual TLS handshake over a pipe between a server and
// a client configured by the reloaders and reports both sides' errors.
func handshake(srv, cli *Reloader) (error, error) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	s := tls.Server(a, srv.ServerConfig(nil))
	c := tls.Client(b, cli.ClientConfig(nil))
	errc := make(chan error, 1)
	go func() { errc <- s.Handshake(); _ = a.Close() }()
	cerr := c.Handshake()
	_ = b.Close()
	return <-errc, cerr
}

func TestReloaderHandshakeAndReload(t *testing.T) {
	ca, other := mustCA(t, "c1"), mustCA(t, "c2")
	dir := t.TempDir()
	n1, _ := IssueNode(ca, dir, "n1", nil)
	n2, _ := IssueNode(ca, dir, "n2", nil)
	srv, err := NewReloader(n1.Cert, n1.Key, n1.CA)
	if err != nil {
		t.Fatal(err)
	}
	cli, err := NewReloader(n2.Cert, n2.Key, n2.CA)
	if err != nil {
		t.Fatal(err)
	}
	if serr, cerr := handshake(srv, cli); serr != nil || cerr != nil {
		t.Fatalf("handshake: server %v, client %v", serr, cerr)
	}
	// Replace the client's certificate with one from another CA: after a
	// reload the server refuses it.
	odir := t.TempDir()
	o2, _ := IssueNode(other, odir, "n2", nil)
	for _, p := range [][2]string{{o2.Cert, n2.Cert}, {o2.Key, n2.Key}} {
		b, _ := os.ReadFile(p[0])
		if err := writeFile(p[1], b); err != nil {
			t.Fatal(err)
		}
	}
	if err := cli.Reload(); err != nil {
		t.Fatal(err)
	}
	if serr, _ := handshake(srv, cli); serr == nil || !strings.Contains(serr.Error(), "unknown authority") {
		t.Fatalf("server accepted another CA's certificate after reload: %v", serr)
	}
	// A broken file keeps the material in use.
	if err := writeFile(n2.Cert, []byte("junk")); err != nil {
		t.Fatal(err)
	}
	if err := cli.Reload(); err == nil {
		t.Fatal("reload of a junk certificate succeeded")
	}
	if id, _ := NodeID(cli.Leaf()); id != "n2" {
		t.Fatalf("leaf after a failed reload: %q", id)
	}
}

func TestReloaderNoticesFileChange(t *testing.T) {
	ca := mustCA(t, "c1")
	dir := t.TempDir()
	n1, _ := IssueNode(ca, dir, "n1", nil)
	r, err := NewReloader(n1.Cert, n1.Key, n1.CA)
	if err != nil {
		t.Fatal(err)
	}
	before := r.Leaf().SerialNumber
	var lastErr error
	r.OnReload = func(err error) { lastErr = err }
	_ = os.Remove(n1.Key)
	if _, err := IssueNode(ca, dir, "n1", nil); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for r.Leaf().SerialNumber.Cmp(before) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("a changed certificate file was not reloaded within 5s")
		}
		_, _ = r.GetCertificate(nil)
		time.Sleep(50 * time.Millisecond)
	}
	r.mu.Lock() // OnReload runs under it: it has returned
	err = lastErr
	r.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
}
