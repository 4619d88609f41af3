package conformance

import (
	"os"
	"strings"
)

// exitReason is the panic or fatal line of a node's log, else its tail.
func (c *cluster) exitReason(n *node) string {
	b, _ := os.ReadFile(n.Log)
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "panic:") || strings.HasPrefix(l, "fatal error:") {
			return "log: " + strings.TrimSpace(l)
		}
	}
	return "log: " + c.logTail(n)
}

// checkAlive fails the scenario for every node process that exited.
func (c *cluster) checkAlive() {
	for _, n := range c.nodes {
		if n.ExitedOnItsOwn() {
			c.fail(n.Name, "every committed entry the schema allows must apply on every replica; a node must not stop on one",
				"writd %s exited during the scenario (%s)", n.Name, c.exitReason(n))
		}
	}
}
