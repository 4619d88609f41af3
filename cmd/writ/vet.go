package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"

	"github.com/writ-dev/writ/schema/ir"
	"github.com/writ-dev/writ/schema/load"
)

type vetReport struct {
	Schema      string       `json:"schema"`
	Fingerprint string       `json:"fingerprint,omitempty"`
	OK          bool         `json:"ok"`
	Findings    []ir.Finding `json:"findings"`
}

func cmdVet(args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("writ vet", flag.ContinueOnError)
	fl.SetOutput(stderr)
	asJSON := fl.Bool("json", false, "print the report as JSON")
	if err := fl.Parse(args); err != nil {
		return 2
	}
	dir := defaultSchema
	if fl.NArg() > 1 {
		fmt.Fprintln(stderr, "writ vet: at most one schema directory")
		return 2
	}
	if fl.NArg() == 1 {
		dir = fl.Arg(0)
	}
	res, err := load.Dir(dir)
	if err != nil {
		fmt.Fprintf(stderr, "writ vet: %v\n", err)
		return 1
	}
	rep := vetReport{Schema: dir, OK: !res.Failed(), Findings: res.Findings}
	if rep.Findings == nil {
		rep.Findings = []ir.Finding{}
	}
	if res.Schema != nil {
		rep.Fingerprint = res.Schema.Fingerprint()
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			fmt.Fprintf(stderr, "writ vet: %v\n", err)
			return 1
		}
	} else {
		printFindings(stdout, res.Findings, false)
		fmt.Fprintf(stdout, "writ vet: %s: %d finding(s)", dir, len(res.Findings))
		if rep.OK {
			fmt.Fprintf(stdout, "; ok (fingerprint %s)\n", rep.Fingerprint)
		} else {
			fmt.Fprintln(stdout, "; BLOCKED/INCOMPLETE findings must be fixed")
		}
	}
	if !rep.OK {
		return 1
	}
	return 0
}
