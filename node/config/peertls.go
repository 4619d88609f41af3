package config

import (
	"crypto/x509"
	"fmt"
	"path/filepath"

	"github.com/writ-dev/writ/pki"
)

// RaftTLS is the peer transport's mutual TLS material: this node's
// certificate and key, and the CA its peers' certificates must come from.
type RaftTLS struct {
	CertFile, KeyFile, CAFile string
}

// Enabled reports whether peer TLS is configured.
func (t RaftTLS) Enabled() bool { return t.CertFile != "" }

// peerTLS reads raft.tls.*, raft.max_frame_bytes and raft.max_snapshot_bytes. The three files are
// set together; the certificate must verify against the CA and name
// node.id, so a node never starts with material its peers would refuse.
func (s source) peerTLS(n *Node) error {
	var err error
	if n.MaxFrameBytes, err = s.integerKey("raft.max_frame_bytes"); err != nil {
		return err
	}
	if n.MaxSnapshotBytes, err = s.integerKey("raft.max_snapshot_bytes"); err != nil {
		return err
	}
	keys := []string{"raft.tls.cert_file", "raft.tls.key_file", "raft.tls.ca_file"}
	vals := make([]string, len(keys))
	set := 0
	for i, k := range keys {
		if vals[i], err = s.str(k); err != nil {
			return err
		}
		if vals[i] != "" {
			set++
			if vals[i], err = filepath.Abs(vals[i]); err != nil {
				return s.fail(k, err.Error(), "")
			}
		}
	}
	if set == 0 {
		return nil
	}
	for i, k := range keys {
		if vals[i] == "" {
			return s.fail(k, "not set, but other raft.tls keys are", "set raft.tls.cert_file, raft.tls.key_file and raft.tls.ca_file together (writ certs node makes them)")
		}
	}
	t := RaftTLS{CertFile: vals[0], KeyFile: vals[1], CAFile: vals[2]}
	if m, ok := othersCanRead(t.KeyFile); ok {
		return s.fail("raft.tls.key_file", fmt.Sprintf("%s is readable by group or others (mode %v)", t.KeyFile, m), "chmod 600 "+t.KeyFile)
	}
	r, err := pki.NewReloader(t.CertFile, t.KeyFile, t.CAFile)
	if err != nil {
		return s.fail("raft.tls.cert_file", err.Error(), "point raft.tls.cert_file, key_file and ca_file at a matching PEM certificate, key and CA")
	}
	if err := pki.VerifyChain(r.Pool(), []*x509.Certificate{r.Leaf()}, x509.ExtKeyUsageClientAuth); err != nil {
		return s.fail("raft.tls.cert_file", fmt.Sprintf("does not verify against raft.tls.ca_file: %v", err), "issue it with the cluster's CA (writ certs node "+n.NodeID+")")
	}
	id, err := pki.NodeID(r.Leaf())
	if err != nil {
		return s.fail("raft.tls.cert_file", err.Error(), "issue it with writ certs node "+n.NodeID)
	}
	if id != n.NodeID {
		return s.fail("raft.tls.cert_file", fmt.Sprintf("the certificate is node %q's, not node.id %q's", id, n.NodeID), "issue one with writ certs node "+n.NodeID)
	}
	n.RaftTLS = t
	return nil
}
