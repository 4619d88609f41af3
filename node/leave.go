package node

import (
	"fmt"
	"time"
)

// Leave waits up to the configured membership.leave_drain_timeout for the
// fact outbox to drain before it departs. Facts in the outbox are
// acknowledged to their reporters and live only in this node's data
// directory until they commit: a node that left and had its directory
// deleted would lose them.

// UndrainedError is Leave's answer when the fact outbox did not drain
// within membership.leave_drain_timeout: the node stopped without leaving, so that a
// restart from its data directory delivers the facts.
type UndrainedError struct {
	Facts  int
	Waited time.Duration
}

func (e *UndrainedError) Error() string {
	return fmt.Sprintf("node: did not leave the cluster: %d acknowledged facts in the outbox were not committed within %s; "+
		"stopped as a member instead: restart this node from its data directory (do not delete it) so they are delivered, then send SIGTERM again",
		e.Facts, e.Waited)
}

// drainOutbox waits, up to d, until the fact outbox is empty, and
// returns how many facts it still holds. The API is closed by then, so
// nothing new arrives; the pipeline still proposes what it holds.
func (n *Node) drainOutbox(d time.Duration) int {
	deadline := time.Now().Add(d)
	logged := false
	for {
		depth := n.pl.Outbox().Depth
		if depth == 0 || !time.Now().Before(deadline) {
			return depth
		}
		if !logged {
			n.log.Info("writd: leaving: waiting for the fact outbox to drain", "facts", depth, "up_to", d)
			logged = true
		}
		time.Sleep(50 * time.Millisecond)
	}
}
