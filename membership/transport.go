package membership

import (
	"fmt"
	"log"
	"net"
	"strings"
	"time"

	"github.com/hashicorp/memberlist"
)

// boundTransport is memberlist's UDP/TCP transport whose outgoing TCP
// streams (push-pull state sync, fallback probes, user messages) leave from
// the gossip bind address. memberlist's own transport dials them from
// whatever source address the kernel picks (127.0.0.1 for a loopback peer),
// so a firewall rule between two node addresses would cut gossip's UDP but
// not its TCP, and a partition would behave differently from a real one.
// UDP already leaves from the bound socket.
type boundTransport struct {
	*memberlist.NetTransport
	local *net.TCPAddr // nil when bound to an unspecified address
}

var _ memberlist.NodeAwareTransport = (*boundTransport)(nil)

// newBoundTransport listens on bindAddr:bindPort (port 0: a kernel-chosen
// port, the same for UDP and TCP, retried as memberlist does when the
// kernel's choice is taken for the other protocol).
func newBoundTransport(bindAddr string, bindPort int, logger *log.Logger) (*boundTransport, error) {
	nc := &memberlist.NetTransportConfig{BindAddrs: []string{bindAddr}, BindPort: bindPort, Logger: logger}
	attempts := 1
	if bindPort == 0 {
		attempts = 10
	}
	var nt *memberlist.NetTransport
	var err error
	for i := 0; i < attempts; i++ {
		if nt, err = memberlist.NewNetTransport(nc); err == nil || !strings.Contains(err.Error(), "address already in use") {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("membership: gossip transport on %s: %w", net.JoinHostPort(bindAddr, fmt.Sprint(bindPort)), err)
	}
	t := &boundTransport{NetTransport: nt}
	if ip := net.ParseIP(bindAddr); ip != nil && !ip.IsUnspecified() {
		t.local = &net.TCPAddr{IP: ip}
	}
	return t, nil
}

// DialTimeout implements memberlist.Transport.
func (t *boundTransport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	return t.DialAddressTimeout(memberlist.Address{Addr: addr}, timeout)
}

// DialAddressTimeout implements memberlist.NodeAwareTransport: the stream
// is dialled from the bind address.
func (t *boundTransport) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	d := net.Dialer{Timeout: timeout}
	if t.local != nil {
		d.LocalAddr = t.local
	}
	return d.Dial("tcp", a.Addr)
}
