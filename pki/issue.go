package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"time"
)

// Option adjusts an issued certificate.
type Option func(*issueOpts)

type issueOpts struct {
	notBefore, notAfter time.Time
}

// Validity sets the certificate's validity period (default: from a minute
// ago for LeafValidity). Tests use it to make expired and not-yet-valid
// certificates.
func Validity(notBefore, notAfter time.Time) Option {
	return func(o *issueOpts) { o.notBefore, o.notAfter = notBefore, notAfter }
}

// IssueNode issues, with the CA in caDir, a certificate for node nodeID to
// outDir/<nodeID>.crt and outDir/<nodeID>.key. Its identity is the URI SAN
// spiffe://writ/node/<nodeID>; hosts (IP addresses or DNS names) are the
// addresses its listeners are reached at. It is valid as both a TLS server
// and a TLS client certificate: peers authenticate each other with it.
func IssueNode(caDir, outDir, nodeID string, hosts []string, opts ...Option) (Files, error) {
	if err := checkName("node ID", nodeID); err != nil {
		return Files{}, err
	}
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: nodeID, Organization: []string{"writ node"}},
		URIs:        []*url.URL{NodeURI(nodeID)},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	for _, h := range hosts {
		if h == "" {
			continue
		}
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	return issue(caDir, outDir, nodeID, tmpl, opts)
}

// IssueClient issues, with the CA in caDir, a client certificate for name
// to outDir/<name>.crt and outDir/<name>.key. Its identity is the URI SAN
// spiffe://writ/client/<name>; roles are hints, one per subject OU, that a
// server maps to permissions (ClientIdentity reads them back).
func IssueClient(caDir, outDir, name string, roles []string, opts ...Option) (Files, error) {
	if err := checkName("client name", name); err != nil {
		return Files{}, err
	}
	for _, r := range roles {
		if !roleRE.MatchString(r) {
			return Files{}, fmt.Errorf("pki: role %q: want [a-z][a-z0-9_.:/-]{0,127}, e.g. read, write or operator", r)
		}
	}
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: name, Organization: []string{"writ client"}, OrganizationalUnit: roles},
		URIs:        []*url.URL{ClientURI(name)},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	return issue(caDir, outDir, name, tmpl, opts)
}

func issue(caDir, outDir, base string, tmpl *x509.Certificate, opts []Option) (Files, error) {
	ca, err := LoadCA(caDir)
	if err != nil {
		return Files{}, err
	}
	now := time.Now()
	o := issueOpts{notBefore: now.Add(-time.Minute), notAfter: now.Add(LeafValidity)}
	for _, opt := range opts {
		opt(&o)
	}
	if !o.notAfter.After(o.notBefore) {
		return Files{}, errors.New("pki: validity: not-after must be later than not-before")
	}
	serial, err := newSerial()
	if err != nil {
		return Files{}, err
	}
	tmpl.SerialNumber = serial
	tmpl.NotBefore, tmpl.NotAfter = o.notBefore, o.notAfter
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Files{}, fmt.Errorf("pki: key: %w", err)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		return Files{}, fmt.Errorf("pki: certificate: %w", err)
	}
	files := Files{Cert: filepath.Join(outDir, base+".crt"), Key: filepath.Join(outDir, base+".key"), CA: filepath.Join(caDir, CACertFile)}
	if err := writePair(outDir, files.Cert, files.Key, der, key); err != nil {
		return Files{}, err
	}
	return files, nil
}
