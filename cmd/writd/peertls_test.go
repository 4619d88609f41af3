package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	writv1 "github.com/writ-dev/writ/api/writv1"
	"github.com/writ-dev/writ/pki"
	"github.com/writ-dev/writ/raftstore"
)

// Peer TLS tests run nodes on 127.0.42.1–.4; the attacker dials from .50.
const peerAttacker = "127.0.42.50"

// peerTLSEnv configures a node's raft.tls keys.
func peerTLSEnv(f pki.Files) []string {
	return []string{"WRIT_RAFT_TLS_CERT_FILE=" + f.Cert, "WRIT_RAFT_TLS_KEY_FILE=" + f.Key, "WRIT_RAFT_TLS_CA_FILE=" + f.CA}
}

// peerStream opens a raft transport stream to addr from the attacker's
// address, sends frame and returns the stream's final error.
func peerStream(t *testing.T, addr string, creds credentials.TransportCredentials, md metadata.MD, frame []byte) error {
	t.Helper()
	d := &net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(peerAttacker)}}
	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.ForceCodec(rawFrames{}), grpc.MaxCallSendMsgSize(1<<30)),
		grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) { return d.DialContext(ctx, "tcp", a) }))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(metadata.NewOutgoingContext(context.Background(), md), 10*time.Second)
	defer cancel()
	st, err := conn.NewStream(ctx, &grpc.StreamDesc{StreamName: "Stream", ClientStreams: true}, "/writ.raftstore.v1.Transport/Stream")
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

// holder presents the certificate in f and accepts any server: an
// attacker probing what the node accepts.
func holder(t *testing.T, f pki.Files) credentials.TransportCredentials {
	t.Helper()
	cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		t.Fatal(err)
	}
	return credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{cert}, InsecureSkipVerify: true}) //nolint:gosec // the attacker
}

func frameOf(t *testing.T, msgs ...*raftpb.Message) []byte {
	t.Helper()
	b := binary.AppendUvarint(nil, uint64(len(msgs)))
	for _, m := range msgs {
		mb, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		b = append(binary.AppendUvarint(b, uint64(len(mb))), mb...)
	}
	return b
}

// waitLogLine waits until p's log has a line holding every part.
func waitLogLine(t *testing.T, p *proc, parts ...string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for _, line := range strings.Split(readLog(t, p), "\n") {
			all := true
			for _, s := range parts {
				all = all && strings.Contains(line, s)
			}
			if all {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s logged no line with %q within 10s; log:\n%s", p.name, parts, readLog(t, p))
}

func rssKB(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.Atoi(f[1])
			return kb
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

// TestPeerTLSRefusesUnauthenticatedPeersOnRealWritd runs three writd
// processes with peer mTLS and attacks one's raft port: every attempt is
// refused with the reason and the source address logged, a node without a
// peer certificate is listed refused and never becomes a learner, a
// reloaded certificate is served without a restart, and the cluster keeps
// committing throughout.
func TestPeerTLSRefusesUnauthenticatedPeersOnRealWritd(t *testing.T) {
	root := t.TempDir()
	ca, certs := filepath.Join(root, "ca"), filepath.Join(root, "certs")
	if _, err := pki.NewCA(ca, "test"); err != nil {
		t.Fatal(err)
	}
	hosts := []string{"127.0.42.1", "127.0.42.2", "127.0.42.3"}
	files := map[string]pki.Files{}
	c := &cluster{t: t, bin: buildBinaries(t), args: []string{"--membership-profile", "local"}}
	t.Cleanup(c.stopAll)
	for i, h := range hosts {
		name := "n" + strconv.Itoa(i+1)
		f, err := pki.IssueNode(ca, certs, name, []string{h})
		if err != nil {
			t.Fatal(err)
		}
		files[name] = f
		p := &proc{t: t, name: name, host: h, dir: filepath.Join(root, name), env: peerTLSEnv(f)}
		if i > 0 {
			p.join = c.nodes[0].gossip()
		}
		c.nodes = append(c.nodes, p)
		c.start(p)
		c.waitReady(p, 40*time.Second)
	}
	c.waitVoters(3, 40*time.Second)
	if r, err := submit(c.nodes[0], "queue.control", `{"queue":"q","action":"create"}`, 5*time.Second); err != nil || r.Outcome.String() != "COMMITTED" {
		t.Fatalf("submit over a TLS cluster: %v %v", r, err)
	}
	if l := readLog(t, c.nodes[0]); !strings.Contains(l, "peer_tls=true") || !strings.Contains(l, "cluster_id=") {
		t.Fatalf("n1 does not log peer TLS and its cluster ID at start:\n%s", l)
	}

	target := c.nodes[0]
	addr := target.host + ":7071"
	self := raftstore.RaftID(target.name)
	// A heartbeat at term 1<<20: stepped, it would depose the leader.
	hb := func(from string) []byte {
		return frameOf(t, &raftpb.Message{Type: raftpb.MsgHeartbeat.Enum(), To: new(self), From: new(raftstore.RaftID(from)), Term: new(uint64(1 << 20))})
	}
	hdr := func(from string, cluster bool) metadata.MD {
		md := metadata.Pairs("writ-from-id", strconv.FormatUint(raftstore.RaftID(from), 10), "writ-from-addr", peerAttacker+":7071")
		if cluster {
			// The real cluster ID, as an insider would know it.
			b, err := os.ReadFile(filepath.Join(target.dir, "raft", "cluster_id"))
			if err != nil {
				t.Fatal(err)
			}
			id, _ := strconv.ParseUint(strings.TrimSpace(string(b)), 16, 64)
			md.Set("writ-cluster-id", strconv.FormatUint(id, 16))
		}
		return md
	}
	other := filepath.Join(root, "other")
	if _, err := pki.NewCA(other, "other"); err != nil {
		t.Fatal(err)
	}
	foreign, _ := pki.IssueNode(other, filepath.Join(root, "foreign"), "n2", nil)
	client, _ := pki.IssueClient(ca, filepath.Join(root, "client"), "alice", []string{"operator"})
	stranger, _ := pki.IssueNode(ca, filepath.Join(root, "stranger"), "n9", nil)
	now := time.Now()
	expired, _ := pki.IssueNode(ca, filepath.Join(root, "expired"), "n2", nil, pki.Validity(now.Add(-2*time.Hour), now.Add(-time.Hour)))
	early, _ := pki.IssueNode(ca, filepath.Join(root, "early"), "n2", nil, pki.Validity(now.Add(time.Hour), now.Add(2*time.Hour)))
	stolen := files["n3"] // node A's valid certificate
	src := "source=" + peerAttacker + ":"
	for _, a := range []struct {
		name  string
		creds credentials.TransportCredentials
		md    metadata.MD
		frame []byte
		log   []string
	}{
		{"plaintext peer", insecure.NewCredentials(), hdr("n2", true), hb("n2"), []string{"TLS handshake failed", src}},
		{"certificate from another CA", holder(t, foreign), hdr("n2", true), hb("n2"), []string{"TLS handshake failed", "unknown authority", src}},
		{"valid CA, wrong SAN (a client identity)", holder(t, client), hdr("n2", true), hb("n2"), []string{"TLS handshake failed", "names client", src}},
		{"expired certificate", holder(t, expired), hdr("n2", true), hb("n2"), []string{"TLS handshake failed", "expired", src}},
		{"not-yet-valid certificate", holder(t, early), hdr("n2", true), hb("n2"), []string{"TLS handshake failed", "not valid before", src}},
		{"n3's certificate, header claiming n2", holder(t, stolen), hdr("n2", true), hb("n2"), []string{"refused peer stream", "stream header claims", src}},
		{"n3's certificate, message From n2", holder(t, stolen), hdr("n3", true), hb("n2"), []string{"message not from the authenticated peer", src}},
		{"n3's certificate, no cluster ID", holder(t, stolen), hdr("n3", false), hb("n3"), []string{"refused peer stream", "no cluster ID", src}},
		{"forged message from a non-member", holder(t, stranger), hdr("n9", true), hb("n9"), []string{"non-member", src}},
	} {
		_ = peerStream(t, addr, a.creds, a.md, a.frame)
		waitLogLine(t, target, a.log...)
		t.Logf("%s: refused", a.name)
	}

	// A 100 MiB frame from an authenticated member is refused from its
	// header: the node does not grow by it.
	pid := target.pid()
	before := rssKB(t, pid)
	big := make([]byte, 100<<20)
	_ = peerStream(t, addr, holder(t, stolen), hdr("n3", true), big)
	waitLogLine(t, target, "frame over MaxFrameBytes refused", src)
	big = nil
	if grow := rssKB(t, pid) - before; grow > 10<<10 {
		t.Fatalf("a refused 100 MiB frame grew %s by %d KiB (limit 10 MiB)", target.name, grow)
	} else {
		t.Logf("100 MiB frame: RSS grew %d KiB", grow)
	}

	// A node with the gossip membership but no peer certificate is listed
	// refused by the leader and never added.
	lead := c.leader(20 * time.Second)
	n4 := &proc{t: t, name: "n4", host: "127.0.42.4", dir: filepath.Join(root, "n4"), join: c.nodes[0].gossip()}
	c.nodes = append(c.nodes, n4)
	c.start(n4)
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		m, err := lead.client.Members(ctx, &writv1.MembersRequest{})
		cancel()
		found := false
		if err == nil {
			for _, r := range m.Refused {
				if r.Id == "n4" && strings.Contains(r.Reason, "peer credentials not verified") {
					found = true
				}
			}
			for _, x := range m.Members {
				if x.Id == "n4" && x.Role != "" && x.Role != "none" {
					t.Fatalf("n4 without a peer certificate is a %s: %+v", x.Role, x)
				}
			}
		}
		if found {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("n4 not listed refused for its peer certificate within 30s: %v %v", m, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	c.stop(n4)
	c.nodes = c.nodes[:3]

	// SIGHUP reloads n1's certificate: a new connection is served the new one.
	_ = os.Remove(files["n1"].Key)
	if _, err := pki.IssueNode(ca, certs, "n1", []string{hosts[0]}); err != nil {
		t.Fatal(err)
	}
	fresh, err := pki.ReadCerts(files["n1"].Cert)
	if err != nil {
		t.Fatal(err)
	}
	if err := target.signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitLogLine(t, target, "peer TLS files reloaded")
	kp, _ := tls.LoadX509KeyPair(stolen.Cert, stolen.Key)
	conn, err := tls.Dial("tcp", addr, &tls.Config{Certificates: []tls.Certificate{kp}, InsecureSkipVerify: true, NextProtos: []string{"h2"}}) //nolint:gosec // reads the served certificate
	if err != nil {
		t.Fatal(err)
	}
	served := conn.ConnectionState().PeerCertificates[0]
	_ = conn.Close()
	if !bytes.Equal(served.Raw, fresh[0].Raw) {
		t.Fatalf("after SIGHUP n1 serves serial %s, want the reissued %s", served.SerialNumber, fresh[0].SerialNumber)
	}

	select {
	case <-target.exited():
		t.Fatalf("%s exited; log:\n%s", target.name, readLog(t, target))
	default:
	}
	if r, err := submit(c.leader(20*time.Second), "job.submit", `{"job_id":"after","queue":"q","priority":1,"command":"x"}`, 5*time.Second); err != nil || r.Outcome.String() != "COMMITTED" {
		t.Fatalf("submit after the attacks: %v %v", r, err)
	}
	c.converge(20 * time.Second)
}
