package node

import "fmt"

// watchStorage turns a storage failure into the node's fatal error (W10):
// raft stopping by itself (a WAL, snapshot or state write failed, or an
// entry cannot be applied), and the fact outbox failing a write or fsync,
// after which it acknowledges nothing more. Either way the node stops
// (writd exits 1, or 3 for a fatal apply stop) and recovers from disk when
// it starts again. Both failures are logged at ERROR where they happen.
func (n *Node) watchStorage() {
	go func() {
		<-n.rs.Done()
		select {
		case <-n.done:
		default:
			n.fatal <- fmt.Errorf("raft stopped: %w", n.rs.Err())
		}
	}()
	go func() {
		select {
		case <-n.pl.OutboxFailed():
			n.fatal <- fmt.Errorf("fact outbox: %w", n.pl.OutboxErr())
		case <-n.done:
		}
	}()
}
