package node

import (
	"errors"
	"fmt"

	"github.com/writ-dev/writ/node/config"
	"github.com/writ-dev/writ/pki"
)

// loadPeerTLS reads the raft transport's certificate material (nil when
// raft.tls is not configured). A changed file is picked up at the next
// handshake; ReloadTLS (SIGHUP) reloads at once.
func (n *Node) loadPeerTLS(cfg *config.Node) (*pki.Reloader, error) {
	t := cfg.RaftTLS
	if !t.Enabled() {
		return nil, nil
	}
	r, err := pki.NewReloader(t.CertFile, t.KeyFile, t.CAFile)
	if err != nil {
		return nil, startErr("raft.tls: %v: point raft.tls.cert_file, key_file and ca_file at a matching certificate, key and CA", err)
	}
	r.OnReload = func(err error) {
		if err != nil {
			n.log.Error("writd: peer TLS files changed but do not load; keeping the certificate in use", "err", err)
			return
		}
		n.log.Info("writd: peer TLS files changed: reloaded", "cert_file", t.CertFile, "not_after", r.Leaf().NotAfter)
	}
	n.peerTLS = r
	n.log.Info("writd: peer TLS on", "cert_file", t.CertFile, "ca_file", t.CAFile, "not_after", r.Leaf().NotAfter)
	return r, nil
}

// watchAPITLS keeps the API's certificate material (nil: plaintext) for
// ReloadTLS and logs reloads caused by a changed file.
func (n *Node) watchAPITLS(r *pki.Reloader, certFile string) {
	if r == nil {
		return
	}
	r.OnReload = func(err error) {
		if err != nil {
			n.log.Error("writd: API TLS files changed but do not load; keeping the certificate in use", "err", err)
			return
		}
		n.log.Info("writd: API TLS files changed: reloaded", "cert_file", certFile, "not_after", r.Leaf().NotAfter)
	}
	n.apiTLS = r
}

// ReloadTLS re-reads the peer and API certificate files (writd does on
// SIGHUP); new connections use them, established ones keep theirs. On
// error the material in use stays (each set reloads on its own).
func (n *Node) ReloadTLS() error {
	var errs []error
	if n.peerTLS != nil {
		if err := n.peerTLS.Reload(); err != nil {
			n.log.Error("writd: reload of peer TLS files failed; keeping the certificate in use", "err", err)
			errs = append(errs, err)
		} else {
			n.log.Info("writd: peer TLS files reloaded", "not_after", n.peerTLS.Leaf().NotAfter)
		}
	}
	if n.apiTLS != nil {
		if err := n.apiTLS.Reload(); err != nil {
			n.log.Error("writd: reload of API TLS files failed; keeping the certificate in use", "err", err)
			errs = append(errs, err)
		} else {
			n.log.Info("writd: API TLS files reloaded", "not_after", n.apiTLS.Leaf().NotAfter, "serial", n.apiTLS.Leaf().SerialNumber.String())
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("node: %w", err)
	}
	return nil
}
