package main

import (
	"io"

	"github.com/writ-dev/writ/conformance"
	"github.com/writ-dev/writ/examples/jobs/jobsgen"
	"github.com/writ-dev/writ/schema/ir"
)

// cmdConformance runs the conformance suite (see docs/conformance.md). The
// generated catalogs linked here are the ones whose generated code the
// suite can exercise; any other schema is checked through its runtime
// catalog (schema/runtimecat), the one a stock writd --schema serves.
func cmdConformance(args []string, stdout, stderr io.Writer) int {
	return conformance.Main(args, stdout, stderr, []ir.Catalog{jobsgen.Catalog()})
}
