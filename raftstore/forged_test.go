package raftstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"github.com/writ-dev/writ/internal/proctest"
	"github.com/writ-dev/writ/kv"
)

// syncBuf collects log output from several goroutines.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// encodeTestFrame encodes raft messages as one transport frame.
func encodeTestFrame(t *testing.T, msgs ...*raftpb.Message) []byte {
	t.Helper()
	b := binary.AppendUvarint(nil, uint64(len(msgs)))
	for _, m := range msgs {
		mb, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		b = binary.AppendUvarint(b, uint64(len(mb)))
		b = append(b, mb...)
	}
	return b
}

// forgerDialer dials from the test clusters' /24 (host 50), a client no
// node knows.
func forgerDialer() *net.Dialer {
	return &net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(loopback(50))}}
}

// sendForged opens a transport stream to addr as an unknown client (no
// stream header), sends one frame and returns the stream's final error.
func sendForged(t *testing.T, addr string, frame []byte) error {
	t.Helper()
	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodec(rawCodec{})),
		grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) {
			return forgerDialer().DialContext(ctx, "tcp", a)
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := conn.NewStream(ctx, &grpc.StreamDesc{StreamName: "Stream", ClientStreams: true}, transportMethod)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.SendMsg(&frame); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	_ = st.CloseSend()
	var out []byte
	return st.RecvMsg(&out)
}

// TestForgedMessagesFromTheNetworkAreRefused sends, from a client that
// is no member, the messages that used to crash or brick a node: a
// heartbeat committing far beyond the log (raft panicked), proposals that
// do not decode or name no entries or carry a conf change that does not
// decode (raft panicked, or the entry was committed and stopped every
// replica at apply), an append with an undecodable entry and a snapshot
// with garbage data. Each is refused, the stream dropped and the source
// address logged; every node keeps serving and the replicas converge.
func TestForgedMessagesFromTheNetworkAreRefused(t *testing.T) {
	logs := make([]*syncBuf, 3)
	c := newCluster(t, 3, func(i int, cfg *Config) {
		logs[i] = &syncBuf{}
		cfg.Logger = slog.New(slog.NewTextHandler(logs[i], nil))
	})
	li := c.leader(10 * time.Second)
	leader := c.nodes[li]
	fi := (li + 1) % 3
	follower := c.nodes[fi]
	mustPropose(t, leader, put("before", "k", "v"))
	term := leader.term.Load()
	lid, fid := leader.id, follower.id
	badCC, _ := proto.Marshal(&raftpb.ConfChange{Type: raftpb.ConfChangeAddNode.Enum(), NodeId: new(uint64(77)), Context: []byte{0xff}})
	forged := []struct {
		name string
		to   *Node
		m    *raftpb.Message
	}{
		{"heartbeat beyond the log", follower, &raftpb.Message{Type: raftpb.MsgHeartbeat.Enum(), To: new(fid), From: new(lid), Term: new(term), Commit: new(uint64(1 << 40))}},
		{"undecodable proposal", leader, &raftpb.Message{Type: raftpb.MsgProp.Enum(), To: new(lid), From: new(fid), Entries: []*raftpb.Entry{{Data: []byte{9, 9, 9}}}}},
		{"proposal with an invalid command", leader, &raftpb.Message{Type: raftpb.MsgProp.Enum(), To: new(lid), From: new(fid), Entries: []*raftpb.Entry{{Data: encodeEnvelope(fid, 1, []kv.Command{{ID: "x", Effect: kv.Effect{Writes: []kv.Write{{Key: ""}}}}})}}}},
		{"empty proposal", leader, &raftpb.Message{Type: raftpb.MsgProp.Enum(), To: new(lid), From: new(fid)}},
		{"undecodable conf change", leader, &raftpb.Message{Type: raftpb.MsgProp.Enum(), To: new(lid), From: new(fid), Entries: []*raftpb.Entry{{Type: raftpb.EntryConfChange.Enum(), Data: []byte{0xff, 0xff}}}}},
		{"conf change with a bad member context", leader, &raftpb.Message{Type: raftpb.MsgProp.Enum(), To: new(lid), From: new(fid), Entries: []*raftpb.Entry{{Type: raftpb.EntryConfChange.Enum(), Data: badCC}}}},
		{"append of an undecodable entry", follower, &raftpb.Message{Type: raftpb.MsgApp.Enum(), To: new(fid), From: new(lid), Term: new(term), Index: new(follower.commit.Load()), LogTerm: new(term),
			Entries: []*raftpb.Entry{{Term: new(term), Index: new(follower.commit.Load() + 1), Data: []byte{7}}}}},
		{"snapshot with garbage data", follower, &raftpb.Message{Type: raftpb.MsgSnap.Enum(), To: new(fid), From: new(lid), Term: new(term),
			Snapshot: &raftpb.Snapshot{Data: []byte("WRITSNAP\x01\x01\xff"), Metadata: &raftpb.SnapshotMetadata{Index: new(uint64(1 << 30)), Term: new(term), ConfState: &raftpb.ConfState{Voters: []uint64{lid}}}}}},
		{"message for another node", follower, &raftpb.Message{Type: raftpb.MsgHeartbeat.Enum(), To: new(uint64(12345)), From: new(lid), Term: new(term)}},
	}
	for _, f := range forged {
		frame := encodeTestFrame(t, f.m)
		if err := sendForged(t, f.to.Addr(), frame); err == nil || !strings.Contains(err.Error(), "malformed") {
			t.Errorf("%s (%d bytes): stream ended with %v, want it refused as malformed", f.name, len(frame), err)
		}
	}
	time.Sleep(300 * time.Millisecond) // forwarded proposals are stepped off the stream
	for i := range c.nodes {
		if !c.alive(i) {
			t.Fatalf("node %d stopped: %v", i, c.nodes[i].Err())
		}
	}
	for _, i := range []int{li, fi} {
		if l := logs[i].String(); !strings.Contains(l, "dropping stream: refused message") || !strings.Contains(l, "source="+loopback(50)+":") {
			t.Fatalf("node %d did not log the refusals with their source:\n%s", i, l)
		}
	}
	c.leader(10 * time.Second)
	for _, n := range c.nodes {
		mustPropose(t, n, put("after-"+n.ID(), "k-"+n.ID(), "v"))
	}
	c.converge(15 * time.Second)
}

// TestProposeRefusesAnEntryOverMaxEntryBytes: the leader appends only
// batches that fit; the error names the limit and the node keeps serving.
func TestProposeRefusesAnEntryOverMaxEntryBytes(t *testing.T) {
	c := newCluster(t, 1, func(_ int, cfg *Config) { cfg.MaxEntryBytes = 64 << 10 })
	n := c.nodes[c.leader(10*time.Second)]
	_, err := n.Propose(context.Background(), []kv.Command{put("big", "k", strings.Repeat("x", 65<<10))})
	if !errors.Is(err, ErrEntryTooLarge) || !errors.Is(err, kv.ErrDropped) || !strings.Contains(err.Error(), "MaxEntryBytes (65536)") {
		t.Fatalf("propose over the limit: %v", err)
	}
	mustPropose(t, n, put("fits", "k", strings.Repeat("x", 60<<10)))
	cfg := Config{NodeID: "x", DataDir: t.TempDir(), RaftAddr: "127.0.0.1:0", MaxEntryBytes: 64 << 20, MaxFrameBytes: 32 << 20}
	if _, err := cfg.withDefaults(); err == nil || !strings.Contains(err.Error(), "MaxFrameBytes") {
		t.Fatalf("frame smaller than an entry accepted: %v", err)
	}
}

// TestHugeFrameHeaderIsRefusedBeforeAllocation writes, over raw TCP, an
// HTTP/2 transport stream whose one gRPC message claims 200 MiB: the node
// refuses it from the length prefix (the stream ends at once, logged with
// the source), its heap does not grow, and it keeps serving.
func TestHugeFrameHeaderIsRefusedBeforeAllocation(t *testing.T) {
	logs := &syncBuf{}
	c := newCluster(t, 1, func(_ int, cfg *Config) { cfg.Logger = slog.New(slog.NewTextHandler(logs, nil)) })
	n := c.nodes[c.leader(10*time.Second)]
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	conn, err := forgerDialer().Dial("tcp", n.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	frame := func(typ, flags byte, stream uint32, payload []byte) []byte {
		h := []byte{byte(len(payload) >> 16), byte(len(payload) >> 8), byte(len(payload)), typ, flags}
		h = binary.BigEndian.AppendUint32(h, stream)
		return append(h, payload...)
	}
	var hdr []byte
	for _, kv := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", transportMethod}, {":authority", "x"}, {"content-type", "application/grpc"}, {"te", "trailers"}} {
		hdr = append(hdr, 0, byte(len(kv[0])))
		hdr = append(hdr, kv[0]...)
		hdr = append(hdr, byte(len(kv[1])))
		hdr = append(hdr, kv[1]...)
	}
	msg := binary.BigEndian.AppendUint32([]byte{0}, 200<<20)
	msg = append(msg, make([]byte, 16)...)
	var out []byte
	out = append(out, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"...)
	out = append(out, frame(4, 0, 0, nil)...) // SETTINGS
	out = append(out, frame(1, 4, 1, hdr)...) // HEADERS, END_HEADERS
	out = append(out, frame(0, 0, 1, msg)...) // DATA: a 200 MiB message begins
	if _, err := conn.Write(out); err != nil {
		t.Fatal(err)
	}
	// Read frames until the server ends stream 1.
	ended := false
	for !ended {
		var h [9]byte
		if _, err := io.ReadFull(conn, h[:]); err != nil {
			t.Fatalf("reading the server's answer: %v (the stream was not ended)", err)
		}
		l := int(h[0])<<16 | int(h[1])<<8 | int(h[2])
		payload := make([]byte, l)
		if _, err := io.ReadFull(conn, payload); err != nil {
			t.Fatal(err)
		}
		typ, flags, stream := h[3], h[4], binary.BigEndian.Uint32(h[5:9])&0x7fffffff
		switch {
		case typ == 4 && flags&1 == 0:
			if _, err := conn.Write(frame(4, 1, 0, nil)); err != nil {
				t.Fatal(err)
			}
		case stream == 1 && (typ == 3 || typ == 1 && flags&1 != 0):
			ended = true // RST_STREAM, or trailers ending the stream
		case typ == 7:
			ended = true // GOAWAY
		}
	}
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	if grow := int64(after.HeapAlloc) - int64(before.HeapAlloc); grow > 10<<20 {
		t.Fatalf("heap grew by %d bytes on a refused frame", grow)
	}
	proctest.WaitFor(t, 5*time.Second, "the refusal logged", func() bool {
		return strings.Contains(logs.String(), "frame over MaxFrameBytes refused") && strings.Contains(logs.String(), "source="+loopback(50)+":")
	})
	mustPropose(t, n, put("after", "k", "v"))
}

// BenchmarkCheckAppendEntry is what the receive check adds per entry of
// an append: one decode of a typical batch (one command, two writes).
func BenchmarkCheckAppendEntry(b *testing.B) {
	c := newCluster(b, 1, nil)
	n := c.nodes[0]
	cmd := put("req:r-0123456789abcdef", "job/j1", strings.Repeat("x", 300))
	cmd.Payload = []byte(strings.Repeat("p", 200))
	cmd.Effect.Writes = append(cmd.Effect.Writes, kv.Write{Key: "_m/job/j1", Value: []byte("RUNNING"), IfRev: 3})
	e := &raftpb.Entry{Data: encodeEnvelope(1, 2, []kv.Command{cmd})}
	b.ReportAllocs()
	for b.Loop() {
		if err := n.checkProposedEntry(e); err != nil {
			b.Fatal(err)
		}
	}
}
