package membership

import (
	"net"
	"testing"
	"time"
)

// TestGossipStreamsDialFromBindAddr: serf's TCP push-pull (the join's state
// sync) must leave from the gossip bind address, not from the address the
// kernel would pick, so that a firewall rule between two node addresses
// cuts gossip's TCP too. The seed is a plain listener that records the
// source address of the connection it accepts.
func TestGossipStreamsDialFromBindAddr(t *testing.T) {
	seed, err := net.Listen("tcp", "127.0.47.2:0")
	if err != nil {
		t.Skipf("127.0.47.2 not available: %v", err)
	}
	defer seed.Close()
	accepted := make(chan net.Addr, 1)
	go func() {
		c, err := seed.Accept()
		if err != nil {
			return
		}
		accepted <- c.RemoteAddr()
		c.Close()
	}()
	cfg := testConfig("n1", "127.0.47.1", seed.Addr().String())
	cfg.JoinAttempts = 1
	done := make(chan struct{})
	go func() {
		defer close(done)
		if a, err := Start(cfg, nil); err == nil {
			_ = a.Shutdown()
		}
	}()
	select {
	case ra := <-accepted:
		ip := ra.(*net.TCPAddr).IP.String()
		if ip != "127.0.47.1" {
			t.Fatalf("gossip's TCP stream came from %s, want the bind address 127.0.47.1", ra)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the seed never received gossip's TCP push-pull")
	}
	seed.Close()
	<-done
}
