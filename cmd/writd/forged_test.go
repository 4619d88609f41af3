package main

import (
	"context"
	"encoding/binary"
	"net"
	"strings"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"github.com/writ-dev/writ/raftstore"
)

// rawFrames is the raft transport's codec: frames pass through as bytes.
type rawFrames struct{}

func (rawFrames) Marshal(v any) ([]byte, error) { return *(v.(*[]byte)), nil }
func (rawFrames) Unmarshal(data []byte, v any) error {
	*(v.(*[]byte)) = append([]byte(nil), data...)
	return nil
}
func (rawFrames) Name() string { return "writ-raw" }

// TestForgedRaftMessagesDoNotCrashWritd sends a real writd's raft port,
// from a client that is no member, a 33-byte heartbeat that commits far
// past the log (raft used to panic and the process died) and a proposal
// that does not decode (it used to be committed and stop the node at
// apply, again at every restart). Both are refused; the process keeps
// running and commits a job afterwards.
func TestForgedRaftMessagesDoNotCrashWritd(t *testing.T) {
	c := newCluster(t, "127.0.10.42")
	p := c.nodes[0]
	if _, err := submit(p, "queue.control", `{"queue":"q","action":"create"}`, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	self := raftstore.RaftID("n1")
	forged := []*raftpb.Message{
		{Type: raftpb.MsgHeartbeat.Enum(), To: new(self), From: new(raftstore.RaftID("n2")), Term: new(uint64(1 << 20)), Commit: new(uint64(1 << 40))},
		{Type: raftpb.MsgProp.Enum(), To: new(self), From: new(raftstore.RaftID("n2")), Entries: []*raftpb.Entry{{Data: []byte{9, 9, 9}}}},
	}
	dialer := &net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.10.43")}}
	for _, m := range forged {
		mb, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		frame := binary.AppendUvarint(binary.AppendUvarint(nil, 1), uint64(len(mb)))
		frame = append(frame, mb...)
		conn, err := grpc.NewClient("passthrough:///"+p.host+":7071", grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithDefaultCallOptions(grpc.ForceCodec(rawFrames{})),
			grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) { return dialer.DialContext(ctx, "tcp", a) }))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		st, err := conn.NewStream(ctx, &grpc.StreamDesc{StreamName: "Stream", ClientStreams: true}, "/writ.raftstore.v1.Transport/Stream")
		if err != nil {
			t.Fatal(err)
		}
		_ = st.SendMsg(&frame)
		_ = st.CloseSend()
		var out []byte
		err = st.RecvMsg(&out)
		cancel()
		_ = conn.Close()
		if err == nil || !strings.Contains(err.Error(), "malformed") {
			t.Fatalf("%s (%d bytes): %v, want it refused as malformed", m.GetType(), len(frame), err)
		}
	}
	time.Sleep(500 * time.Millisecond)
	select {
	case <-p.exited():
		t.Fatalf("writd exited after the forged messages; log:\n%s", readLog(t, p))
	default:
	}
	r, err := submit(p, "job.submit", `{"job_id":"after","queue":"q","priority":1,"command":"x"}`, 5*time.Second)
	if err != nil || r.Outcome.String() != "COMMITTED" {
		t.Fatalf("submit after the forged messages: %v %v", r, err)
	}
	if l := readLog(t, p); !strings.Contains(l, "refused message") || !strings.Contains(l, "source=127.0.10.43:") {
		t.Fatalf("refusals not logged with their source:\n%s", l)
	}
}
