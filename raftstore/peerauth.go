package raftstore

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	grpcpeer "google.golang.org/grpc/peer"

	"github.com/writ-dev/writ/pki"
)

// Peer authentication. With Config.TLS set, both ends of every transport
// connection present a certificate from the cluster CA whose identity
// (pki.NodeID) is their node ID; a stream is bound to that identity: its
// header may not claim another node, and every message on it must come
// From that node. Independently of TLS, every stream carries the cluster
// ID (a stream from another cluster is refused), a stream header never
// re-points a peer this node already knows, and messages from nodes that
// are not members are dropped.

const mdClusterID = "writ-cluster-id"

// errRefusedStream ends a stream authStream refused (the reason is logged,
// not sent: the peer learns nothing about this node's view).
var errRefusedStream = errors.New("raftstore: transport: stream refused")

// serverCreds is the transport's TLS server side; a refused handshake is
// logged with the source address and the reason.
func (t *transport) serverCreds() credentials.TransportCredentials {
	cfg := t.tls.ServerConfig(func(leaf *x509.Certificate) error {
		_, err := pki.NodeID(leaf)
		return err
	})
	return loggedCreds{TransportCredentials: credentials.NewTLS(cfg), t: t}
}

// clientCreds is the TLS client side of the stream to peer id: the server
// must prove it is that node.
func (t *transport) clientCreds(id uint64) credentials.TransportCredentials {
	return credentials.NewTLS(t.clientTLSConfig(id))
}

// clientTLSConfig requires the server to present node id's certificate.
func (t *transport) clientTLSConfig(id uint64) *tls.Config {
	return t.tls.ClientConfig(func(leaf *x509.Certificate) error {
		nid, err := pki.NodeID(leaf)
		if err != nil {
			return err
		}
		if RaftID(nid) != id {
			return fmt.Errorf("raftstore: transport: peer %x presented the certificate of node %q (raft ID %x)", id, nid, RaftID(nid))
		}
		return nil
	})
}

type loggedCreds struct {
	credentials.TransportCredentials
	t *transport
}

func (c loggedCreds) ServerHandshake(conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	out, info, err := c.TransportCredentials.ServerHandshake(conn)
	if err != nil {
		c.t.log.Warn("raftstore: transport: refused peer connection: TLS handshake failed", "source", conn.RemoteAddr().String(), "err", err)
	}
	return out, info, err
}

func (c loggedCreds) Clone() credentials.TransportCredentials {
	return loggedCreds{TransportCredentials: c.TransportCredentials.Clone(), t: c.t}
}

// streamAuth is what a stream was authenticated as.
type streamAuth struct {
	// from is the raft ID every message on the stream must come from
	// (0: not bound, a plaintext stream without a header).
	from uint64
	// node is the certificate's node ID ("" without TLS).
	node string
}

// authStream checks a new stream's identity, header and cluster ID, and
// learns the peer's address if it is new. An error refuses the stream; it
// has been logged.
func (t *transport) authStream(ctx context.Context, src string) (streamAuth, error) {
	var a streamAuth
	md, _ := metadata.FromIncomingContext(ctx)
	if t.tls != nil {
		p, _ := grpcpeer.FromContext(ctx)
		var info credentials.TLSInfo
		if p != nil {
			info, _ = p.AuthInfo.(credentials.TLSInfo)
		}
		if len(info.State.PeerCertificates) == 0 {
			return a, t.refuse(src, "no peer certificate")
		}
		id, err := pki.NodeID(info.State.PeerCertificates[0])
		if err != nil {
			return a, t.refuse(src, err.Error())
		}
		a.node, a.from = id, RaftID(id)
	}
	var hid uint64
	var haddr string
	if ids, addrs := md.Get(mdFromID), md.Get(mdFromAddr); len(ids) == 1 && len(addrs) == 1 {
		v, err := strconv.ParseUint(ids[0], 10, 64)
		if err != nil || v == 0 {
			return a, t.refuse(src, fmt.Sprintf("bad %s header %q", mdFromID, ids[0]))
		}
		hid, haddr = v, addrs[0]
	}
	if t.tls != nil && hid != 0 && hid != a.from {
		return a, t.refuse(src, fmt.Sprintf("stream header claims raft ID %x but the certificate is node %q (raft ID %x)", hid, a.node, a.from))
	}
	if a.from == 0 {
		a.from = hid
	}
	if err := t.checkCluster(md, src); err != nil {
		return a, err
	}
	if hid != 0 && t.admit(hid) {
		// Only a member's address is learned (or, on a joiner that knows
		// no member yet, the leader's that streams to it).
		if t.learnPeer(hid, haddr) {
			t.log.Info("raftstore: transport: learned a peer's address from its stream", "peer", hid, "addr", haddr, "source", src)
		}
		// The peer is up (again): if our stream to it is down,
		// reconnect now rather than after the backoff.
		t.kickPeer(hid)
	}
	return a, nil
}

// checkCluster refuses a stream from another cluster. A node that knows
// no cluster ID yet (a joiner) adopts the first one it is sent; with TLS a
// stream without one is refused once the ID is known.
func (t *transport) checkCluster(md metadata.MD, src string) error {
	own := t.cluster.get()
	vals := md.Get(mdClusterID)
	if len(vals) != 1 {
		if own != 0 && t.tls != nil {
			return t.refuse(src, "stream carries no cluster ID")
		}
		return nil
	}
	got, err := strconv.ParseUint(vals[0], 16, 64)
	if err != nil || got == 0 {
		return t.refuse(src, fmt.Sprintf("bad cluster ID %q", vals[0]))
	}
	if own == 0 {
		ok, err := t.cluster.adopt(got)
		if err != nil {
			t.log.Error("raftstore: transport: cannot persist the cluster ID", "err", err)
			return t.refuse(src, "cluster ID not persisted")
		}
		if ok {
			t.log.Info("raftstore: joined cluster", "cluster_id", fmt.Sprintf("%016x", got), "source", src)
		}
		return nil
	}
	if got != own {
		return t.refuse(src, fmt.Sprintf("cluster ID %016x is not this cluster's %016x", got, own))
	}
	return nil
}

func (t *transport) refuse(src, reason string) error {
	t.log.Warn("raftstore: transport: refused peer stream", "source", src, "reason", reason)
	return errRefusedStream
}

// admit reports whether a message from raft ID from may be stepped: from
// is a member (a peer the log configured), or this node knows no member
// yet (a joiner waiting for its first snapshot or entries).
func (t *transport) admit(from uint64) bool {
	m := t.members.Load()
	if m == nil || len(*m) == 0 {
		return true
	}
	_, ok := (*m)[from]
	return ok
}

// syncMembers replaces the member set admit checks against.
func (t *transport) syncMembers(ids []uint64) {
	next := make(map[uint64]struct{}, len(ids))
	for _, id := range ids {
		next[id] = struct{}{}
	}
	t.members.Store(&next)
}

// logStreamFailure logs a failed stream to the peer at DEBUG; a failed
// TLS handshake (the peer is not who the log says, or refuses this node)
// is logged at WARN, once per distinct error.
func (p *peer) logStreamFailure(err error, backoff time.Duration) {
	if err != nil && p.t.tls != nil && strings.Contains(err.Error(), "authentication handshake failed") {
		if msg := err.Error(); msg != p.lastAuthErr {
			p.lastAuthErr = msg
			p.t.log.Warn("raftstore: transport: cannot authenticate peer; retrying", "peer", p.id, "addr", p.addr, "err", err)
		}
		return
	}
	p.t.log.Debug("raftstore: transport: peer stream failed; reconnecting", "peer", p.id, "addr", p.addr, "err", err, "backoff", backoff)
}
