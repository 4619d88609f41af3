package writemux

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/writ-dev/writ/api/writv1"
)

// submitOnly is a writ.v1 server from before the Write stream.
type submitOnly struct{ writv1.UnimplementedWritServer }

// TestNodeWithoutWriteStreamProcessesNothing: against a node without the
// Write method, a call sent on the stream comes back ErrNoStream with its
// sent flag cleared (the stream never reached a handler, so nothing was
// processed and the caller may send it unary), and later calls fail the
// same way at once without opening another stream. Before, a call already
// sent was reported as the stream's Unimplemented error, which a caller
// cannot tell from an answer.
func TestNodeWithoutWriteStreamProcessesNothing(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.24.9:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	writv1.RegisterWritServer(g, submitOnly{})
	go func() { _ = g.Serve(lis) }()
	defer g.Stop()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	m := New(conn, 4, nil)
	defer m.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := range 3 {
		var sent atomic.Bool
		_, err := m.Call(ctx, &writv1.WriteRequest{Call: &writv1.WriteRequest_Submit{Submit: &writv1.SubmitRequest{}}}, &sent)
		if !errors.Is(err, ErrNoStream) {
			t.Fatalf("call %d: %v, want ErrNoStream", i, err)
		}
		if sent.Load() {
			t.Fatalf("call %d: sent flag set for a call no handler saw", i)
		}
	}
}
