package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"

	"github.com/writ-dev/writ/api/writv1"
	"github.com/writ-dev/writ/pki"
)

// servedAPICert is the certificate a fresh TLS connection to addr is
// served.
func servedAPICert(t *testing.T, addr string) *x509.Certificate {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}}) //nolint:gosec // reads the served certificate
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0]
}

func readCert(t *testing.T, file string) *x509.Certificate {
	t.Helper()
	certs, err := pki.ReadCerts(file)
	if err != nil {
		t.Fatal(err)
	}
	return certs[0]
}

// TestAPICertificateReloadsOnSIGHUP: a real writd serving API TLS gets a
// new certificate and key written over its files and a SIGHUP. A new
// connection is served the new certificate (and verifies it); a client
// connected before keeps working on its connection, without redialling,
// still holding the old certificate. Files that do not load on the next
// SIGHUP are logged and the certificate in use stays.
func TestAPICertificateReloadsOnSIGHUP(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, dir, "writ-test")
	host := "127.0.52.11"
	spec := certSpec{name: "n1", uri: "spiffe://writ/node/n1", ips: []string{host}}
	certFile, keyFile := ca.issue(t, spec)
	old := readCert(t, certFile)
	clientCert, clientKey := ca.issue(t, certSpec{name: "harness", uri: "spiffe://writ/client/harness", ou: []string{"read"}})
	c := &cluster{args: []string{"--api-tls-cert-file", certFile, "--api-tls-key-file", keyFile, "--api-tls-client-ca-file", ca.file},
		dial: []grpc.DialOption{tlsDial(t, ca, clientCert, clientKey)}}
	c = newClusterWith(t, c, host)
	n := c.nodes[0]

	// A client connected before the reload, counting its dials.
	var dials atomic.Int32
	before, err := grpc.NewClient(n.api(), tlsDial(t, ca, clientCert, clientKey),
		grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) {
			dials.Add(1)
			return (&net.Dialer{}).DialContext(ctx, "tcp", a)
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer before.Close()
	oldClient := writv1.NewWritClient(before)
	statusVia := func(cl writv1.WritClient) *x509.Certificate {
		t.Helper()
		ctx, cancel := ctx5()
		defer cancel()
		var p peer.Peer
		if _, err := cl.Status(ctx, &writv1.StatusRequest{}, grpc.Peer(&p)); err != nil {
			t.Fatalf("status: %v", err)
		}
		return p.AuthInfo.(credentials.TLSInfo).State.PeerCertificates[0]
	}
	if got := statusVia(oldClient); !bytes.Equal(got.Raw, old.Raw) {
		t.Fatalf("before the reload the node serves serial %s, want %s", got.SerialNumber, old.SerialNumber)
	}

	// New key and certificate over the same files, then SIGHUP.
	ca.issue(t, spec)
	fresh := readCert(t, certFile)
	if bytes.Equal(fresh.Raw, old.Raw) {
		t.Fatal("the reissued certificate is the old one")
	}
	if err := n.signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitLogLine(t, n, "API TLS files reloaded", "serial="+fresh.SerialNumber.String())
	if got := servedAPICert(t, n.api()); !bytes.Equal(got.Raw, fresh.Raw) {
		t.Fatalf("after SIGHUP a new connection is served serial %s, want the reissued %s", got.SerialNumber, fresh.SerialNumber)
	}
	// A new gRPC client verifies the new certificate and is served.
	after, err := grpc.NewClient(n.api(), tlsDial(t, ca, clientCert, clientKey))
	if err != nil {
		t.Fatal(err)
	}
	defer after.Close()
	if got := statusVia(writv1.NewWritClient(after)); !bytes.Equal(got.Raw, fresh.Raw) {
		t.Fatalf("a new gRPC client was served serial %s, want %s", got.SerialNumber, fresh.SerialNumber)
	}
	// The old client keeps its connection and its certificate.
	for range 3 {
		if got := statusVia(oldClient); !bytes.Equal(got.Raw, old.Raw) {
			t.Fatalf("the client connected before the reload now sees serial %s, want its connection's %s", got.SerialNumber, old.SerialNumber)
		}
	}
	if d := dials.Load(); d != 1 {
		t.Fatalf("the client connected before the reload dialled %d times, want 1", d)
	}

	// Junk in the certificate file: the reload fails, the node keeps
	// serving the certificate in use.
	if err := os.WriteFile(certFile, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := n.signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitLogLine(t, n, "reload of API TLS files failed; keeping the certificate in use")
	time.Sleep(100 * time.Millisecond)
	if got := servedAPICert(t, n.api()); !bytes.Equal(got.Raw, fresh.Raw) {
		t.Fatalf("after a failed reload the node serves serial %s, want %s still", got.SerialNumber, fresh.SerialNumber)
	}
	if got := statusVia(oldClient); !bytes.Equal(got.Raw, old.Raw) {
		t.Fatalf("old client after the failed reload: serial %s", got.SerialNumber)
	}
}
