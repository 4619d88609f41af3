package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"

	"github.com/writ-dev/writ/node"
	"github.com/writ-dev/writ/raftstore"
)

// waitSignal waits for SIGTERM or SIGINT or a fatal node error. SIGHUP
// reloads the peer and API TLS certificate files and keeps waiting.
func waitSignal(sig <-chan os.Signal, n *node.Node) (os.Signal, error) {
	for {
		select {
		case s := <-sig:
			if s == syscall.SIGHUP {
				_ = n.ReloadTLS() // logged either way
				continue
			}
			return s, nil
		case err := <-n.Fatal():
			return nil, err
		}
	}
}

// fatalCode reports a fatal error and picks the exit code.
func fatalCode(stderr io.Writer, n *node.Node, err error) int {
	var ae *raftstore.ApplyError
	if errors.As(err, &ae) {
		// A restart stops at the same entry: say so, and exit with a
		// code a supervisor can tell from a crash.
		fmt.Fprintf(stderr, "writd: fatal apply stop at index %d (%s, command %q): %v\n", ae.Index, ae.Type, ae.CommandID, err)
		return exitApply
	}
	fmt.Fprintf(stderr, "writd: fatal: %v: stopping; restart recovers from %s\n", err, n.DataDir())
	return exitFatal
}
