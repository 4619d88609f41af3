package raftstore

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
)

// VerifyPeer proves that the node listening at raftAddr holds node id's
// peer credentials: with peer TLS, it completes a handshake in which the
// server presents a certificate from the cluster CA naming id (and accepts
// this node's). Without peer TLS there is nothing to prove. The membership
// reconciler calls it before it adds a learner or promotes one.
func (n *Node) VerifyPeer(ctx context.Context, id, raftAddr string) error {
	if n.cfg.TLS == nil {
		return nil
	}
	if raftAddr == "" {
		return fmt.Errorf("raftstore: node %s has no raft address", id)
	}
	d := &net.Dialer{}
	if n.tr.localIP != nil {
		d.LocalAddr = &net.TCPAddr{IP: n.tr.localIP}
	}
	raw, err := d.DialContext(ctx, "tcp", raftAddr)
	if err != nil {
		return fmt.Errorf("raftstore: node %s at %s: %w", id, raftAddr, err)
	}
	defer raw.Close()
	cfg := n.tr.clientTLSConfig(RaftID(id))
	cfg.NextProtos = []string{"h2"}
	c := tls.Client(raw, cfg)
	if err := c.HandshakeContext(ctx); err != nil {
		return fmt.Errorf("raftstore: node %s at %s: peer TLS handshake: %w", id, raftAddr, err)
	}
	return nil
}
