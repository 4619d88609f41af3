package main

import (
	"fmt"
	"io"
	"os"
)

const usage = `usage: writ <command> [flags]

commands:
  init   DIR [--module PATH] [--name NAME] [--replace WRIT_SRC]
         scaffold a new control-plane project: a schema, its generated Go,
         a handler plugin with tests, a Makefile and a README
  gen    [--schema DIR] [--out DIR] [--package NAME] [--check]
         generate Go from the schema; --check regenerates in memory and
         exits 1 with a diff when the files on disk are stale
  vet    [--json] [DIR]
         static findings; exits 1 on any BLOCKED or INCOMPLETE finding
  schema diff [--json] OLD NEW
         which changes between two schema directories are compatible with
         a rolling upgrade; exits 1 on any BLOCKED or INCOMPLETE finding
  conformance [flags]
         run the conformance suite (see docs/conformance.md)
  table  [--schema DIR]
         print the classification table of the embedded jobs schema, or of
         any schema directory (through the runtime catalog)
  certs  init|node|client [flags]
         make a development CA and node or client certificates
         (see docs/security.md)
  version
         print the build (module version, commit, date) and the embedded
         schema's fingerprint (also --version)
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "init":
		return cmdInit(args[1:], stdout, stderr)
	case "gen":
		return cmdGen(args[1:], stdout, stderr)
	case "vet":
		return cmdVet(args[1:], stdout, stderr)
	case "conformance":
		return cmdConformance(args[1:], stdout, stderr)
	case "table":
		return cmdTable(args[1:], stdout, stderr)
	case "schema":
		if len(args) > 1 && args[1] == "diff" {
			return cmdSchemaDiff(args[2:], stdout, stderr)
		}
		fmt.Fprintf(stderr, "writ schema: want `writ schema diff OLD NEW`\n%s", usage)
		return 2
	case "certs":
		return cmdCerts(args[1:], stdout, stderr)
	case "version", "--version":
		return cmdVersion(args[1:], stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "writ: unknown command %q\n%s", args[0], usage)
	return 2
}
