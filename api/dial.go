package api

import (
	"context"
	"net"

	"google.golang.org/grpc"
)

// boundDialer makes a connection to another node leave from this node's
// own API address (its host; the port is the kernel's), as raft's transport
// does from the raft address. Without it the kernel picks the source
// (127.0.0.1 for a loopback peer), and a firewall rule between two node
// addresses would not cut follower→leader forwarding. An unspecified or
// unparsable host (0.0.0.0, a name) leaves the choice to the kernel.
func boundDialer(selfAPI string) grpc.DialOption {
	d := &net.Dialer{}
	if host, _, err := net.SplitHostPort(selfAPI); err == nil {
		if ip := net.ParseIP(host); ip != nil && !ip.IsUnspecified() {
			d.LocalAddr = &net.TCPAddr{IP: ip}
		}
	}
	return grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
		return d.DialContext(ctx, "tcp", addr)
	})
}
