package raftstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/writ-dev/writ/internal/proctest"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// Snapshot chunk tests run on 127.0.52.x.
const chunkSubnet = "127.0.52"

// smallFrames configures a node whose frame cap is 96 KiB: entries and
// batches (and so snapshot chunks) of at most 16 KiB.
func smallFrames(cfg *Config) {
	cfg.MaxEntryBytes = 16 << 10
	cfg.MaxBatchBytes = 16 << 10
	cfg.MaxFrameBytes = 16<<10 + 16<<10 + 64<<10
	cfg.SnapshotCount = 20
	cfg.SnapshotCatchUp = 5
}

// TestSnapshotLargerThanTheFrameCapIsInstalledInChunks: a follower that
// fell behind a compacted log catches up by a snapshot of about 1 MiB,
// ten times the 96 KiB frame cap every node enforces. It arrives in chunks
// and is installed; the follower then holds every key.
func TestSnapshotLargerThanTheFrameCapIsInstalledInChunks(t *testing.T) {
	logs := make([]*syncBuf, 3)
	c := newClusterOn(t, chunkSubnet, 3, func(i int, cfg *Config) {
		smallFrames(cfg)
		logs[i] = &syncBuf{}
		cfg.Logger = slog.New(slog.NewTextHandler(logs[i], nil))
	})
	li := c.leader(10 * time.Second)
	lag := (li + 1) % 3
	c.stop(lag)
	val := strings.Repeat("x", 10<<10)
	const keys = 100
	for i := range keys {
		mustPropose(t, c.nodes[li], put(fmt.Sprintf("id%d", i), fmt.Sprintf("k/%03d", i), val))
	}
	first, _ := c.nodes[li].storage.FirstIndex()
	if first <= 2 {
		t.Fatalf("leader log not compacted (first index %d)", first)
	}
	s, err := c.nodes[li].st.snapshot()
	if err != nil {
		t.Fatal(err)
	}
	msg := &raftpb.Message{Type: raftpb.MsgSnap.Enum(), Snapshot: s}
	if size, limit := proto.Size(msg), c.cfgs[li].MaxFrameBytes; size < 8*limit {
		t.Fatalf("the snapshot is %d bytes, not well over the frame cap %d: the test proves nothing", size, limit)
	}
	n := c.start(lag)
	c.converge(30 * time.Second)
	if n.snapIndex.Load() < first-1 {
		t.Fatalf("lagging follower did not install a snapshot (snap index %d, leader first index %d)", n.snapIndex.Load(), first)
	}
	recs, _ := n.List(context.Background(), "k/", false)
	if len(recs) != keys {
		t.Fatalf("caught-up follower has %d keys, want %d", len(recs), keys)
	}
	for i, l := range logs {
		if strings.Contains(l.String(), "not sending snapshot") || strings.Contains(l.String(), "frame over MaxFrameBytes") {
			t.Fatalf("node %d refused or failed a snapshot:\n%s", i, l)
		}
	}
}

// sendChunkFrames opens a transport stream to addr from 127.0.52.50 (no
// node), sends the frames and returns the stream's final error.
func sendChunkFrames(t *testing.T, addr string, frames ...[]byte) error {
	t.Helper()
	d := &net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(chunkSubnet + ".50")}}
	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodec(rawCodec{})),
		grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) { return d.DialContext(ctx, "tcp", a) }))
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
	for _, f := range frames {
		if err := st.SendMsg(&f); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return err
		}
	}
	_ = st.CloseSend()
	var out []byte
	return st.RecvMsg(&out)
}

// TestChunkedSnapshotsAreBoundedAndChecked: chunks announcing a snapshot
// over MaxSnapshotBytes, chunks out of order, a message frame inside a
// snapshot, and a reassembled message that is not a snapshot each end
// the stream, logged with the source; nothing is held afterwards and the
// node keeps serving.
func TestChunkedSnapshotsAreBoundedAndChecked(t *testing.T) {
	logs := &syncBuf{}
	c := newClusterOn(t, chunkSubnet, 1, func(_ int, cfg *Config) {
		smallFrames(cfg)
		cfg.MaxSnapshotBytes = 1 << 20
		cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
	})
	n := c.nodes[c.leader(10*time.Second)]
	piece := make([]byte, 8<<10)
	hb, _ := proto.Marshal(&raftpb.Message{Type: raftpb.MsgHeartbeat.Enum(), To: new(n.id), From: new(uint64(99))})
	cases := []struct {
		name   string
		frames [][]byte
		code   codes.Code
		log    string
	}{
		{"a snapshot over MaxSnapshotBytes", [][]byte{appendChunkFrame(nil, 2<<20, 0, piece)}, codes.ResourceExhausted, "over MaxSnapshotBytes"},
		{"a chunk that starts no snapshot", [][]byte{appendChunkFrame(nil, 64<<10, 8<<10, piece)}, codes.InvalidArgument, "starts no snapshot"},
		{"a gap between chunks", [][]byte{appendChunkFrame(nil, 64<<10, 0, piece), appendChunkFrame(nil, 64<<10, 16<<10, piece)}, codes.InvalidArgument, "out of order"},
		{"a changed total", [][]byte{appendChunkFrame(nil, 64<<10, 0, piece), appendChunkFrame(nil, 32<<10, 8<<10, piece)}, codes.InvalidArgument, "out of order"},
		{"a message frame inside a snapshot", [][]byte{appendChunkFrame(nil, 64<<10, 0, piece), encodeTestFrame(t, &raftpb.Message{Type: raftpb.MsgHeartbeat.Enum(), To: new(n.id), From: new(uint64(99))})}, codes.InvalidArgument, "inside a chunked snapshot"},
		{"a chunked heartbeat", [][]byte{appendChunkFrame(nil, len(hb), 0, hb)}, codes.InvalidArgument, "only snapshots are sent in chunks"},
		{"a chunk past its total", [][]byte{appendChunkFrame(nil, 4<<10, 0, piece)}, codes.InvalidArgument, "do not fit"},
	}
	for _, tc := range cases {
		err := sendChunkFrames(t, n.Addr(), tc.frames...)
		if status.Code(err) != tc.code || !strings.Contains(err.Error(), tc.log) {
			t.Errorf("%s: stream ended with %v, want %v mentioning %q", tc.name, err, tc.code, tc.log)
		}
	}
	proctest.WaitFor(t, 5*time.Second, "every refusal logged with its source", func() bool {
		return strings.Count(logs.String(), "refused snapshot chunk") >= len(cases)-1 &&
			strings.Contains(logs.String(), "source="+chunkSubnet+".50:")
	})
	proctest.WaitFor(t, 5*time.Second, "the partial snapshots released", func() bool { return n.tr.snapHeld.Load() == 0 })
	mustPropose(t, n, put("after", "k", "v"))
}

// TestSnapshotAssemblyBudgetIsShared: two streams receiving at once share
// one MaxSnapshotBytes; bytes come back when a stream ends (a unit test of
// the assembly, no network).
func TestSnapshotAssemblyBudgetIsShared(t *testing.T) {
	var held atomic.Int64
	a := snapAssembly{held: &held, limit: 100}
	b := snapAssembly{held: &held, limit: 100}
	if _, err := a.add(snapChunk{total: 80, offset: 0, data: make([]byte, 60)}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.add(snapChunk{total: 80, offset: 0, data: make([]byte, 50)}); !errors.Is(err, errSnapshotBudget) {
		t.Fatalf("second assembly past the shared budget: %v", err)
	}
	a.release()
	if held.Load() != 0 {
		t.Fatalf("%d bytes still held after release", held.Load())
	}
	if _, err := b.add(snapChunk{total: 80, offset: 0, data: make([]byte, 50)}); err != nil {
		t.Fatalf("after the first released: %v", err)
	}
}
