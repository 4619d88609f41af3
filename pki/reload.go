package pki

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// checkEvery is how often a handshake looks at the files for changes.
const checkEvery = time.Second

// Reloader holds a certificate, its key and the CA pool that verifies peers,
// read from files and swapped atomically when they change: Reload re-reads
// them (on SIGHUP), and a handshake re-reads them when a file's size or
// modification time changed (checked at most once a second). A failed
// reload keeps the material in use.
type Reloader struct {
	certFile, keyFile, caFile string

	cur atomic.Pointer[material]

	mu        sync.Mutex
	lastCheck time.Time
	// OnReload, if set, is told about every reload caused by a file change
	// (err nil: the new material is in use).
	OnReload func(err error)
}

type material struct {
	cert  *tls.Certificate
	pool  *x509.CertPool
	stamp string // sizes and mtimes of the three files
}

// NewReloader reads certFile, keyFile and caFile; any of them missing or
// not matching is an error naming the file. caFile may be empty: then
// there is no pool (Pool is nil), for a server that verifies no client
// certificates.
func NewReloader(certFile, keyFile, caFile string) (*Reloader, error) {
	r := &Reloader{certFile: certFile, keyFile: keyFile, caFile: caFile}
	if err := r.Reload(); err != nil {
		return nil, err
	}
	return r, nil
}

// Reload reads the files again; on error the previous material stays.
func (r *Reloader) Reload() error {
	stamp := r.stamp()
	cert, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		return fmt.Errorf("pki: load %s and %s: %w", r.certFile, r.keyFile, err)
	}
	if cert.Leaf == nil {
		if cert.Leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return fmt.Errorf("pki: %s: %w", r.certFile, err)
		}
	}
	var pool *x509.CertPool
	if r.caFile != "" {
		if pool, err = LoadPool(r.caFile); err != nil {
			return err
		}
	}
	r.cur.Store(&material{cert: &cert, pool: pool, stamp: stamp})
	return nil
}

func (r *Reloader) stamp() string {
	s := ""
	for _, f := range []string{r.certFile, r.keyFile, r.caFile} {
		if fi, err := os.Stat(f); err == nil {
			s += fmt.Sprintf("%d/%d;", fi.Size(), fi.ModTime().UnixNano())
		} else {
			s += "-;"
		}
	}
	return s
}

// maybeReload reloads when the files changed since the last load.
func (r *Reloader) maybeReload() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if time.Since(r.lastCheck) < checkEvery {
		return
	}
	r.lastCheck = time.Now()
	if r.stamp() == r.cur.Load().stamp {
		return
	}
	err := r.Reload()
	if r.OnReload != nil {
		r.OnReload(err)
	}
}

// Current is the certificate and CA pool in use, reloaded first if a
// file changed (checked at most once a second): what a handshake uses.
func (r *Reloader) Current() (*tls.Certificate, *x509.CertPool) {
	r.maybeReload()
	m := r.cur.Load()
	return m.cert, m.pool
}

// Leaf is the certificate in use.
func (r *Reloader) Leaf() *x509.Certificate { return r.cur.Load().cert.Leaf }

// Pool is the CA pool in use.
func (r *Reloader) Pool() *x509.CertPool { return r.cur.Load().pool }

// GetCertificate is tls.Config.GetCertificate.
func (r *Reloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	r.maybeReload()
	return r.cur.Load().cert, nil
}

// GetClientCertificate is tls.Config.GetClientCertificate.
func (r *Reloader) GetClientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	r.maybeReload()
	return r.cur.Load().cert, nil
}

// VerifyPeer checks the chain a peer presented against the CA pool in use
// and returns its leaf.
func (r *Reloader) VerifyPeer(chain []*x509.Certificate, usage x509.ExtKeyUsage) (*x509.Certificate, error) {
	if err := VerifyChain(r.Pool(), chain, usage); err != nil {
		return nil, err
	}
	return chain[0], nil
}

// ServerConfig is a TLS server configuration that requires a client
// certificate from the CA in use, then asks check (if set) about its leaf.
// The certificate and pool are read at every handshake, so a reload takes
// effect on the next connection.
func (r *Reloader) ServerConfig(check func(leaf *x509.Certificate) error) *tls.Config {
	return &tls.Config{
		MinVersion:     tls.VersionTLS12,
		ClientAuth:     tls.RequireAnyClientCert,
		GetCertificate: r.GetCertificate,
		VerifyConnection: func(cs tls.ConnectionState) error {
			leaf, err := r.VerifyPeer(cs.PeerCertificates, x509.ExtKeyUsageClientAuth)
			if err != nil {
				return err
			}
			if check != nil {
				return check(leaf)
			}
			return nil
		},
	}
}

// ClientConfig is a TLS client configuration that presents the certificate
// in use and requires the server's certificate to come from the CA in use;
// check (if set) then decides on its leaf (identity, not host name, is what
// binds a peer).
func (r *Reloader) ClientConfig(check func(leaf *x509.Certificate) error) *tls.Config {
	return &tls.Config{
		MinVersion:           tls.VersionTLS12,
		GetClientCertificate: r.GetClientCertificate,
		// The chain and identity are verified below against the pool in
		// use, which a reload may replace.
		InsecureSkipVerify: true, //nolint:gosec // verified in VerifyConnection
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("pki: server presented no certificate")
			}
			leaf, err := r.VerifyPeer(cs.PeerCertificates, x509.ExtKeyUsageServerAuth)
			if err != nil {
				return err
			}
			if check != nil {
				return check(leaf)
			}
			return nil
		},
	}
}
