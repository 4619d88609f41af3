package main

import (
	"io"

	"github.com/spf13/cobra"

	"github.com/writ-dev/writ/conformance"
	"github.com/writ-dev/writ/examples/jobs/jobsgen"
	"github.com/writ-dev/writ/raftstore"
	"github.com/writ-dev/writ/schema/ir"
)

// conformanceCmd: the suite parses its own flags (shared with the plugins'
// conformance mains).
func (c *cli) conformanceCmd() *cobra.Command {
	return c.flagCmd("conformance [flags]", "run the conformance suite (see docs/conformance.md; `writ conformance --help` lists its flags)", cmdConformance)
}

// cmdConformance runs the conformance suite (see docs/conformance.md). The
// generated catalogs linked here are the ones whose generated code the
// suite can exercise; any other schema is checked through its runtime
// catalog (schema/runtimecat), the one a stock writd --schema serves.
func cmdConformance(args []string, stdout, stderr io.Writer) int {
	return conformance.MainLinked(args, stdout, stderr, conformance.Linked{
		Catalogs:  []ir.Catalog{jobsgen.Catalog()},
		OpenState: openReplayState,
	})
}

// openReplayState opens raftstore's applied state file for the suite's
// replay check.
func openReplayState(path string) (conformance.ReplayState, error) {
	st, err := raftstore.OpenReplayState(path)
	if err != nil {
		return nil, err
	}
	return st, nil
}
