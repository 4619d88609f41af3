package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"time"
)

// File names in a CA directory.
const (
	CACertFile = "ca.crt"
	CAKeyFile  = "ca.key"
)

// Default validity periods.
const (
	CAValidity   = 10 * 365 * 24 * time.Hour
	LeafValidity = 365 * 24 * time.Hour
)

// Files are the paths of one issued certificate, its key and the CA that
// verifies it.
type Files struct {
	Cert, Key, CA string
}

// CA is a loaded certificate authority that can issue certificates.
type CA struct {
	Cert *x509.Certificate
	Key  crypto.Signer
	dir  string
}

// NewCA creates a certificate authority named name in dir (created 0700):
// dir/ca.crt and dir/ca.key (0600). An existing ca.key is never replaced.
func NewCA(dir, name string) (Files, error) {
	if name == "" {
		return Files{}, errors.New("pki: CA name is empty; name the cluster")
	}
	files := Files{Cert: filepath.Join(dir, CACertFile), Key: filepath.Join(dir, CAKeyFile), CA: filepath.Join(dir, CACertFile)}
	if _, err := os.Stat(files.Key); err == nil {
		return Files{}, fmt.Errorf("pki: %s already exists; remove it to make a new CA (every certificate it issued stops verifying)", files.Key)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Files{}, fmt.Errorf("pki: CA key: %w", err)
	}
	serial, err := newSerial()
	if err != nil {
		return Files{}, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: name + " CA", Organization: []string{"writ"}},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.Add(CAValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return Files{}, fmt.Errorf("pki: CA certificate: %w", err)
	}
	if err := writePair(dir, files.Cert, files.Key, der, key); err != nil {
		return Files{}, err
	}
	return files, nil
}

// LoadCA reads the CA in dir for issuing.
func LoadCA(dir string) (*CA, error) {
	certs, err := ReadCerts(filepath.Join(dir, CACertFile))
	if err != nil {
		return nil, err
	}
	key, err := ReadKey(filepath.Join(dir, CAKeyFile))
	if err != nil {
		return nil, err
	}
	if !certs[0].IsCA {
		return nil, fmt.Errorf("pki: %s is not a CA certificate", filepath.Join(dir, CACertFile))
	}
	return &CA{Cert: certs[0], Key: key, dir: dir}, nil
}

func newSerial() (*big.Int, error) {
	s, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("pki: serial number: %w", err)
	}
	return s.Add(s, big.NewInt(1)), nil
}

// writePair writes a certificate and its key (both 0600) in dir (0700).
// The key is written first and never over an existing one.
func writePair(dir, certPath, keyPath string, der []byte, key *ecdsa.PrivateKey) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("pki: %w", err)
	}
	kb, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return fmt.Errorf("pki: marshal key: %w", err)
	}
	if err := writeNew(keyPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb})); err != nil {
		return err
	}
	return writeFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

// writeNew creates path (0600), refusing to replace an existing file.
func writeNew(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		if errors.Is(err, os.ErrExist) {
			return fmt.Errorf("pki: %s already exists; remove it first to issue a new one", path)
		}
		return fmt.Errorf("pki: %w", err)
	}
	if _, err := f.Write(b); err != nil {
		_ = f.Close()
		return fmt.Errorf("pki: write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("pki: write %s: %w", path, err)
	}
	return nil
}

// writeFile replaces path atomically (0600): a reader never sees half a
// certificate.
func writeFile(path string, b []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("pki: %w", err)
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	if err := tmp.Chmod(0o600); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("pki: %w", err)
	}
	if _, err := tmp.Write(b); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("pki: write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("pki: write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("pki: %w", err)
	}
	return nil
}
