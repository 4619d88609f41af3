package robustness

import (
	"net"
	"os"
	"testing"
	"time"
)

// TestFirewallCutsAndHeals: a cut between two addresses stops a TCP
// connection from one to the other (both ways), leaves other addresses
// alone, and healing restores it. Runs on 127.0.47.5–7.
func TestFirewallCutsAndHeals(t *testing.T) {
	if err := partitionsAvailable(); err != nil {
		if os.Getenv("WRITTEST_ROBUSTNESS_NO_PARTITIONS") == "1" {
			t.Skipf("partitions NOT RUN: %v", err)
		}
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.47.6:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	dial := func(from string) error {
		d := net.Dialer{Timeout: 500 * time.Millisecond, LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
		c, err := d.Dial("tcp", lis.Addr().String())
		if err == nil {
			c.Close()
		}
		return err
	}
	fw := newFirewall()
	defer func() { _ = fw.heal() }()
	if err := dial("127.0.47.5"); err != nil {
		t.Fatalf("before the cut: %v", err)
	}
	if err := fw.cut([]string{"127.0.47.5"}, []string{"127.0.47.6"}, true); err != nil {
		t.Fatal(err)
	}
	if err := dial("127.0.47.5"); err == nil {
		t.Fatal("127.0.47.5 reached 127.0.47.6 through the cut")
	}
	if err := dial("127.0.47.7"); err != nil {
		t.Fatalf("an address outside the cut was cut too: %v", err)
	}
	if err := fw.heal(); err != nil {
		t.Fatal(err)
	}
	if err := dial("127.0.47.5"); err != nil {
		t.Fatalf("after heal: %v", err)
	}
}
