package main

import (
	"fmt"
	"io"

	"github.com/writ-dev/writ/examples/jobs/jobsgen"
	"github.com/writ-dev/writ/version"
)

// cmdVersion prints the build and the embedded jobs schema's fingerprint.
func cmdVersion(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		fmt.Fprintf(stderr, "writ version: takes no arguments (got %q)\n", args)
		return 2
	}
	fmt.Fprint(stdout, version.Get().Text("writ", jobsgen.Catalog().Fingerprint()))
	return 0
}
