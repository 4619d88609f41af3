package main

import (
	"fmt"
	"time"

	"github.com/writ-dev/writ/api/writv1"
)

// catchUpText is a node's catch-up as status and members show it: while
// it runs, applied against the leader's commit, the share of the gap
// closed, the speed and the ETA; afterwards how far behind it is.
func catchUpText(c *writv1.CatchUp) string {
	if c == nil {
		return "-"
	}
	behind := uint64(0)
	if c.Target > c.Applied {
		behind = c.Target - c.Applied
	}
	if !c.Active {
		return fmt.Sprintf("caught up (%d of %d, %d behind)", c.Applied, c.Target, behind)
	}
	eta := "unknown"
	if c.EtaMs > 0 {
		eta = (time.Duration(c.EtaMs) * time.Millisecond).Round(time.Second).String()
	}
	return fmt.Sprintf("catching up: %d of %d (%.0f%%), %.0f entries/s, ETA %s", c.Applied, c.Target, c.Percent, c.EntriesPerSecond, eta)
}
