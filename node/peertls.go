package node

import (
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

// ReloadTLS re-reads the certificate files (writd does on SIGHUP); new
// connections use them, established ones keep theirs. On error the
// material in use stays.
func (n *Node) ReloadTLS() error {
	if n.peerTLS == nil {
		return nil
	}
	if err := n.peerTLS.Reload(); err != nil {
		n.log.Error("writd: reload of peer TLS files failed; keeping the certificate in use", "err", err)
		return fmt.Errorf("node: %w", err)
	}
	n.log.Info("writd: peer TLS files reloaded", "not_after", n.peerTLS.Leaf().NotAfter)
	return nil
}
