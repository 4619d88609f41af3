package raftstore

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/writ-dev/writ/kv"
	"github.com/writ-dev/writ/pki"
)

// Peer-authentication tests use 127.0.42.x: nodes on .1–.9, the attacker
// dials from .50.
func authAddr(host int) string { return fmt.Sprintf("127.0.42.%d", host) }

// tlsCluster starts n nodes with peer mTLS from one CA and returns it with
// the CA directory and the nodes' shared log.
func tlsCluster(t *testing.T, n int) (*cluster, string, *syncBuf) {
	t.Helper()
	root := t.TempDir()
	caDir := filepath.Join(root, "ca")
	if _, err := pki.NewCA(caDir, "test"); err != nil {
		t.Fatal(err)
	}
	logs := &syncBuf{}
	c := &cluster{t: t}
	var peers []Peer
	lis := make([]net.Listener, n)
	for i := range n {
		lis[i] = listen(t, authAddr(i+1))
		peers = append(peers, Peer{ID: fmt.Sprintf("n%d", i+1), Addr: lis[i].Addr().String()})
	}
	for i := range n {
		f, err := pki.IssueNode(caDir, filepath.Join(root, "certs"), peers[i].ID, []string{authAddr(i + 1)})
		if err != nil {
			t.Fatal(err)
		}
		r, err := pki.NewReloader(f.Cert, f.Key, f.CA)
		if err != nil {
			t.Fatal(err)
		}
		c.cfgs = append(c.cfgs, Config{
			NodeID: peers[i].ID, DataDir: filepath.Join(root, peers[i].ID), RaftAddr: peers[i].Addr,
			Listener: lis[i], Peers: peers, TLS: r,
			Logger: slog.New(slog.NewTextHandler(io.MultiWriter(logs, testLogSink()), nil)),
		})
	}
	c.nodes = make([]*Node, n)
	for i := range n {
		c.start(i)
	}
	t.Cleanup(c.stopAll)
	return c, caDir, logs
}

func testLogSink() io.Writer {
	if os.Getenv("WRITTEST_LOG") != "" {
		return os.Stderr
	}
	return io.Discard
}

// attackStream opens a transport stream to addr from 127.0.42.50 with
// creds and header md, sends frame and returns the stream's final error.
func attackStream(t *testing.T, addr string, creds credentials.TransportCredentials, md metadata.MD, frame []byte) error {
	t.Helper()
	d := &net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(authAddr(50))}}
	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.ForceCodec(rawCodec{})),
		grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) { return d.DialContext(ctx, "tcp", a) }))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(metadata.NewOutgoingContext(context.Background(), md), 5*time.Second)
	defer cancel()
	st, err := conn.NewStream(ctx, &grpc.StreamDesc{StreamName: "Stream", ClientStreams: true}, transportMethod)
	if err != nil {
		return err
	}
	if err := st.SendMsg(&frame); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	_ = st.CloseSend()
	var out []byte
	return st.RecvMsg(&out)
}

// attackerTLS presents the certificate in files and accepts any server.
func attackerTLS(t *testing.T, f pki.Files) credentials.TransportCredentials {
	t.Helper()
	cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		t.Fatal(err)
	}
	return credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{cert}, InsecureSkipVerify: true}) //nolint:gosec // the attacker
}

// waitLog waits until the log holds a line with every one of parts.
func waitLog(t *testing.T, logs *syncBuf, parts ...string) {
	t.Helper()
	waitLogN(t, logs, 1, parts...)
}

// waitLogN waits until the log holds n lines with every one of parts.
func waitLogN(t *testing.T, logs *syncBuf, n int, parts ...string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		found := 0
		for _, line := range strings.Split(logs.String(), "\n") {
			all := true
			for _, p := range parts {
				all = all && strings.Contains(line, p)
			}
			if all {
				found++
			}
		}
		if found >= n {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("fewer than %d log lines with %q within 10s; log:\n%s", n, parts, logs.String())
}

func TestPeerTLSRefusesEveryUnauthenticatedPeer(t *testing.T) {
	c, caDir, logs := tlsCluster(t, 3)
	lead := c.leader(10 * time.Second)
	mustPropose(t, c.nodes[lead], put("a1", "k", "v"))
	c.converge(10 * time.Second)
	target := c.nodes[(lead+1)%3]
	termBefore := target.Status().Term
	tid, lid := target.id, c.nodes[lead].id
	// A heartbeat at a far higher term: stepped, it would make the target
	// follow its sender and raise its term to 1000.
	hb := func(from uint64) []byte {
		return encodeTestFrame(t, &raftpb.Message{Type: raftpb.MsgHeartbeat.Enum(), To: new(tid), From: new(from), Term: new(uint64(1000))})
	}
	certs := filepath.Join(t.TempDir(), "certs")
	otherCA := filepath.Join(t.TempDir(), "other")
	if _, err := pki.NewCA(otherCA, "other"); err != nil {
		t.Fatal(err)
	}
	otherN1, _ := pki.IssueNode(otherCA, certs+"-other", c.nodes[lead].ID(), nil)
	client, _ := pki.IssueClient(caDir, certs, "alice", []string{"operator"})
	stranger, _ := pki.IssueNode(caDir, certs, "n9", nil)
	now := time.Now()
	expired, _ := pki.IssueNode(caDir, certs+"-exp", c.nodes[lead].ID(), nil, pki.Validity(now.Add(-2*time.Hour), now.Add(-time.Hour)))
	early, _ := pki.IssueNode(caDir, certs+"-early", c.nodes[lead].ID(), nil, pki.Validity(now.Add(time.Hour), now.Add(2*time.Hour)))
	// The leader's own certificate, stolen: it may speak only as the leader.
	leaderCert := pki.Files{Cert: filepath.Join(filepath.Dir(c.cfgs[lead].DataDir), "certs", c.nodes[lead].ID()+".crt"), Key: filepath.Join(filepath.Dir(c.cfgs[lead].DataDir), "certs", c.nodes[lead].ID()+".key")}
	hdr := func(id uint64, cluster string) metadata.MD {
		md := metadata.Pairs(mdFromID, strconv.FormatUint(id, 10), mdFromAddr, authAddr(50)+":1")
		if cluster != "" {
			md.Set(mdClusterID, cluster)
		}
		return md
	}
	cid := target.ClusterID()
	if cid == "" {
		t.Fatal("a bootstrapped node has no cluster ID")
	}
	cases := []struct {
		name  string
		creds credentials.TransportCredentials
		md    metadata.MD
		frame []byte
		log   []string
	}{
		{"plaintext peer", insecure.NewCredentials(), hdr(lid, cid), hb(lid), []string{"TLS handshake failed", "source=" + authAddr(50)}},
		{"certificate from another CA", attackerTLS(t, otherN1), hdr(lid, cid), hb(lid), []string{"TLS handshake failed", "unknown authority", "source=" + authAddr(50)}},
		{"valid CA, client identity (no node SAN)", attackerTLS(t, client), hdr(lid, cid), hb(lid), []string{"TLS handshake failed", "names client", "source=" + authAddr(50)}},
		{"expired certificate", attackerTLS(t, expired), hdr(lid, cid), hb(lid), []string{"TLS handshake failed", "expired", "source=" + authAddr(50)}},
		{"not-yet-valid certificate", attackerTLS(t, early), hdr(lid, cid), hb(lid), []string{"TLS handshake failed", "not valid before", "source=" + authAddr(50)}},
		{"leader's certificate, header claiming another node", attackerTLS(t, leaderCert), hdr(RaftID("n3x"), cid), hb(lid), []string{"refused peer stream", "stream header claims", "source=" + authAddr(50)}},
		{"leader's certificate, message From another node", attackerTLS(t, leaderCert), hdr(lid, cid), hb(c.nodes[(lead+2)%3].id), []string{"message not from the authenticated peer", "source=" + authAddr(50)}},
		{"leader's certificate, another cluster's ID", attackerTLS(t, leaderCert), hdr(lid, "1234"), hb(lid), []string{"refused peer stream", "is not this cluster's", "source=" + authAddr(50)}},
		{"leader's certificate, no cluster ID", attackerTLS(t, leaderCert), hdr(lid, ""), hb(lid), []string{"refused peer stream", "no cluster ID", "source=" + authAddr(50)}},
		{"non-member with a valid certificate", attackerTLS(t, stranger), hdr(RaftID("n9"), cid), hb(RaftID("n9")), []string{"non-member", "source=" + authAddr(50)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_ = attackStream(t, target.Addr(), tc.creds, tc.md, tc.frame)
			waitLog(t, logs, tc.log...)
			if term := target.Status().Term; term >= 1000 {
				t.Fatalf("the forged heartbeat was stepped: term %d (was %d)", term, termBefore)
			}
		})
	}
	// The header of a refused or a stranger's stream pointed nowhere.
	target.tr.mu.Lock()
	for id, p := range target.tr.peers {
		if strings.HasPrefix(p.addr, authAddr(50)) {
			t.Errorf("peer %x re-pointed to the attacker's %s", id, p.addr)
		}
	}
	target.tr.mu.Unlock()
	mustPropose(t, c.nodes[c.leader(10*time.Second)], put("a2", "k", "v2"))
	c.converge(10 * time.Second)
}

// TestTransportHeaderNeverRepointsKnownPeer: without TLS too, a stream
// header naming a known peer with another address changes nothing.
func TestTransportHeaderNeverRepointsKnownPeer(t *testing.T) {
	ra := &recorder{}
	a := newTransport(1, listen(t, authAddr(10)), transportLimits{queue: 64, batch: 1 << 20, frame: 64 << 20}, ra, testLogger(t), peerSecurity{})
	defer a.close()
	a.setPeer(2, authAddr(11)+":7071")
	md := metadata.Pairs(mdFromID, "2", mdFromAddr, authAddr(50)+":9")
	_ = attackStream(t, a.addr, insecure.NewCredentials(), md, encodeTestFrame(t))
	a.mu.Lock()
	defer a.mu.Unlock()
	if got := a.peers[2].addr; got != authAddr(11)+":7071" {
		t.Fatalf("a stream header re-pointed peer 2 to %s", got)
	}
}

func TestClusterIDDerivedPersistedAndAdopted(t *testing.T) {
	peers := []Peer{{ID: "n2", Addr: "a:2"}, {ID: "n1", Addr: "a:1"}}
	if deriveClusterID(peers) != deriveClusterID([]Peer{peers[1], peers[0]}) {
		t.Fatal("static peers in another order derive another cluster ID")
	}
	if a, b := deriveClusterID(peers[:1]), deriveClusterID(peers[:1]); a == b {
		t.Fatal("two single-node bootstraps derived the same cluster ID")
	}
	dir := t.TempDir()
	c, err := loadClusterID(dir)
	if err != nil || c.get() != 0 {
		t.Fatalf("fresh: %v %v", c.get(), err)
	}
	if ok, err := c.adopt(0xabc); !ok || err != nil {
		t.Fatalf("adopt: %v %v", ok, err)
	}
	if ok, _ := c.adopt(0xdef); ok {
		t.Fatal("a known cluster ID was replaced")
	}
	c2, err := loadClusterID(dir)
	if err != nil || c2.get() != 0xabc {
		t.Fatalf("reloaded: %x %v", c2.get(), err)
	}
	if fi, _ := os.Stat(filepath.Join(dir, clusterIDFile)); fi.Mode().Perm() != 0o600 {
		t.Fatalf("cluster_id mode %v", fi.Mode().Perm())
	}
	_ = os.WriteFile(filepath.Join(dir, clusterIDFile), []byte("zz\n"), 0o600)
	if _, err := loadClusterID(dir); err == nil || !strings.Contains(err.Error(), "not a cluster ID") {
		t.Fatalf("garbage cluster_id: %v", err)
	}
}

// TestPeerTLSNonMemberCannotProposeReconfigureOrRestore: a node holding a
// valid certificate from the cluster CA but outside the configuration
// sends a proposal, a conf change adding a voter and a snapshot; none is
// stepped: no key, no member, no term change.
func TestPeerTLSNonMemberCannotProposeReconfigureOrRestore(t *testing.T) {
	c, caDir, logs := tlsCluster(t, 3)
	lead := c.leader(10 * time.Second)
	mustPropose(t, c.nodes[lead], put("b1", "k", "v"))
	c.converge(10 * time.Second)
	leader, follower := c.nodes[lead], c.nodes[(lead+1)%3]
	stranger, err := pki.IssueNode(caDir, t.TempDir(), "n9", nil)
	if err != nil {
		t.Fatal(err)
	}
	from := RaftID("n9")
	cc, err := proto.Marshal(&raftpb.ConfChange{Type: raftpb.ConfChangeAddNode.Enum(), NodeId: new(RaftID("evil")), Context: encodeMemberContext("evil", authAddr(50)+":7071")})
	if err != nil {
		t.Fatal(err)
	}
	snap, err := leader.st.snapshot()
	if err != nil {
		t.Fatal(err)
	}
	snap.Metadata.Index = new(uint64(1 << 20))
	snap.Metadata.Term = new(uint64(1000))
	frames := []struct {
		to    *Node
		frame []byte
	}{
		{leader, encodeTestFrame(t, &raftpb.Message{Type: raftpb.MsgProp.Enum(), To: new(leader.id), From: new(from),
			Entries: []*raftpb.Entry{{Data: encodeEnvelope(from, 1, []kv.Command{put("forged", "forged", "x")})}}})},
		{leader, encodeTestFrame(t, &raftpb.Message{Type: raftpb.MsgProp.Enum(), To: new(leader.id), From: new(from),
			Entries: []*raftpb.Entry{{Type: raftpb.EntryConfChange.Enum(), Data: cc}}})},
		{follower, encodeTestFrame(t, &raftpb.Message{Type: raftpb.MsgSnap.Enum(), To: new(follower.id), From: new(from), Term: new(uint64(1000)), Snapshot: snap})},
	}
	md := metadata.Pairs(mdFromID, strconv.FormatUint(from, 10), mdFromAddr, authAddr(50)+":7071", mdClusterID, leader.ClusterID())
	seen := map[*Node]int{}
	for i, f := range frames {
		_ = attackStream(t, f.to.Addr(), attackerTLS(t, stranger), md, f.frame)
		seen[f.to]++
		waitLogN(t, logs, seen[f.to], "non-member", "node="+f.to.ID(), "source="+authAddr(50))
		t.Logf("frame %d refused", i)
	}
	// A proposal committed after the forged ones: had they been appended,
	// they would be applied by now.
	mustPropose(t, c.nodes[c.leader(10*time.Second)], put("b2", "k", "v2"))
	c.converge(10 * time.Second)
	for _, n := range c.nodes {
		if _, ok, err := n.Get(context.Background(), "forged", false); ok || err != nil {
			t.Fatalf("%s holds the forged key (err %v)", n.ID(), err)
		}
		if ms := n.Members(); len(ms) != 3 {
			t.Fatalf("%s members %v: a non-member reconfigured the cluster", n.ID(), ms)
		}
		if term := n.Status().Term; term >= 1000 {
			t.Fatalf("%s at term %d: the forged snapshot was stepped", n.ID(), term)
		}
	}
}

// peerTLSConfig gives every node of a newCluster a certificate for its
// node ID from one fresh CA.
func peerTLSConfig(t testing.TB) func(int, *Config) {
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca")
	if _, err := pki.NewCA(ca, "test"); err != nil {
		t.Fatal(err)
	}
	issued := map[string]pki.Files{} // a benchmark starts clusters again
	return func(_ int, c *Config) {
		f, ok := issued[c.NodeID]
		if !ok {
			var err error
			if f, err = pki.IssueNode(ca, filepath.Join(dir, "certs"), c.NodeID, nil); err != nil {
				t.Fatal(err)
			}
			issued[c.NodeID] = f
		}
		var err error
		if c.TLS, err = pki.NewReloader(f.Cert, f.Key, f.CA); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPeerTLSDialerRequiresThePeersOwnCertificate: a node dialling peer n2
// at an address where another node (n3, valid CA) answers never sends it
// anything: the server must prove it is n2.
func TestPeerTLSDialerRequiresThePeersOwnCertificate(t *testing.T) {
	tlsFor := peerTLSConfig(t)
	var ca, cb Config
	ca.NodeID, cb.NodeID = "n1", "n3"
	tlsFor(0, &ca)
	tlsFor(0, &cb)
	logs := &syncBuf{}
	la := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	rb := &recorder{}
	b := newTransport(RaftID("n3"), listen(t, authAddr(12)), transportLimits{queue: 64, batch: 1 << 20, frame: 64 << 20}, rb, testLogger(t), peerSecurity{tls: cb.TLS})
	defer b.close()
	a := newTransport(RaftID("n1"), listen(t, authAddr(11)), transportLimits{queue: 64, batch: 1 << 20, frame: 64 << 20}, &recorder{}, la, peerSecurity{tls: ca.TLS})
	defer a.close()
	n2 := RaftID("n2")
	a.setPeer(n2, b.addr)
	a.send([]*raftpb.Message{{Type: raftpb.MsgHeartbeat.Enum(), To: new(n2), From: new(RaftID("n1")), Term: new(uint64(1))}})
	waitLog(t, logs, "level=WARN", "cannot authenticate peer", "presented the certificate of node", "n3")
	if n := rb.count(); n != 0 {
		t.Fatalf("the impostor received %d messages meant for n2", n)
	}
}
