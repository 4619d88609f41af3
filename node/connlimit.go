package node

import (
	"log/slog"
	"net"
	"sync"
)

// limitListener accepts at most max concurrent connections: beyond it
// Accept waits for one to close, so a new client waits (its handshake
// times out on its side) while the ones served keep working. Reaching the
// limit is logged once per episode, and the return below it.
type limitListener struct {
	net.Listener
	sem chan struct{}
	max int
	log *slog.Logger

	mu   sync.Mutex
	full bool
}

func newLimitListener(l net.Listener, max int, log *slog.Logger) *limitListener {
	return &limitListener{Listener: l, sem: make(chan struct{}, max), max: max, log: log}
}

func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.sem <- struct{}{}:
	default:
		l.mu.Lock()
		if !l.full {
			l.full = true
			l.log.Warn("api: connection limit reached: new client connections wait until one closes", "limit", "api.max_connections", "max", l.max)
		}
		l.mu.Unlock()
		l.sem <- struct{}{}
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.sem
		return nil, err
	}
	return &limitConn{Conn: c, l: l}, nil
}

func (l *limitListener) release() {
	<-l.sem
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.full {
		l.full = false
		l.log.Info("api: below the connection limit again", "limit", "api.max_connections", "max", l.max)
	}
}

type limitConn struct {
	net.Conn
	l    *limitListener
	once sync.Once
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.l.release)
	return err
}
