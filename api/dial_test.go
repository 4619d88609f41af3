package api

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/writ-dev/writ/api/writv1"
)

// TestServer_FakeBackendForwardDialsFromOwnAddr: a follower's forwarding
// connection to the leader leaves from the follower's API address, so a
// firewall rule between the two node addresses cuts it. The "leader" is a
// plain listener that records the source of the connection it accepts.
func TestServer_FakeBackendForwardDialsFromOwnAddr(t *testing.T) {
	leader, err := net.Listen("tcp", "127.0.47.3:0")
	if err != nil {
		t.Skipf("127.0.47.3 not available: %v", err)
	}
	defer leader.Close()
	from := make(chan net.Addr, 1)
	go func() {
		c, err := leader.Accept()
		if err != nil {
			return
		}
		from <- c.RemoteAddr()
		c.Close()
	}()
	follower := &fakeNode{id: "n2", leaderAPI: leader.Addr().String()}
	c := serveFake(t, "127.0.47.4:0", follower)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	go func() {
		_, _ = c.Submit(ctx, &writv1.SubmitRequest{Entry: &writv1.Entry{Type: "job.submit", Payload: []byte(`{}`)}})
	}()
	select {
	case ra := <-from:
		if ip := ra.(*net.TCPAddr).IP.String(); ip != "127.0.47.4" {
			t.Fatalf("forwarding came from %s, want the follower's API address 127.0.47.4", ra)
		}
	case <-ctx.Done():
		t.Fatal("the follower never dialled the leader")
	}
}
