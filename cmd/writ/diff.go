package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/writ-dev/writ/schema/compat"
	"github.com/writ-dev/writ/schema/ir"
	"github.com/writ-dev/writ/schema/load"
)

type diffReport struct {
	Old      string       `json:"old"`
	New      string       `json:"new"`
	OK       bool         `json:"ok"`
	Findings []ir.Finding `json:"findings"`
}

func cmdSchemaDiff(args []string, asJSONv bool, stdout, stderr io.Writer) int {
	asJSON := &asJSONv
	var schemas [2]*ir.Schema
	for i, dir := range args {
		res, err := load.Dir(dir)
		if err != nil {
			fmt.Fprintf(stderr, "writ schema diff: %v\n", err)
			return 1
		}
		if res.Failed() {
			printFindings(stderr, res.Findings, true)
			fmt.Fprintf(stderr, "writ schema diff: %s does not load (fix: run `writ vet %s`)\n", dir, dir)
			return 1
		}
		schemas[i] = res.Schema
	}
	// The same rule decides whether writd admits a node running NEW into a
	// cluster running OLD (schema/compat).
	fs := compat.Diff(schemas[0], schemas[1])
	rep := diffReport{Old: args[0], New: args[1], OK: compat.Check(schemas[0], schemas[1]) == nil, Findings: fs}
	if rep.Findings == nil {
		rep.Findings = []ir.Finding{}
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			fmt.Fprintf(stderr, "writ schema diff: %v\n", err)
			return 1
		}
	} else {
		printFindings(stdout, fs, false)
		switch {
		case len(fs) == 0:
			fmt.Fprintln(stdout, "writ schema diff: no changes that matter to a rolling upgrade")
		case rep.OK:
			fmt.Fprintf(stdout, "writ schema diff: %d change(s), compatible with a rolling upgrade after review\n", len(fs))
		default:
			fmt.Fprintf(stdout, "writ schema diff: %d change(s); BLOCKED changes make a rolling upgrade unsafe\n", len(fs))
		}
	}
	if !rep.OK {
		return 1
	}
	return 0
}
