package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/writ-dev/writ/schema/ir"
	"github.com/writ-dev/writ/schema/load"
)

type vetReport struct {
	Schema      string       `json:"schema"`
	Fingerprint string       `json:"fingerprint,omitempty"`
	OK          bool         `json:"ok"`
	Findings    []ir.Finding `json:"findings"`
}

func (c *cli) vetCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "vet [--json] [DIR]",
		Short: "static findings of a schema directory; exits 1 on any BLOCKED or INCOMPLETE finding",
		Args:  cobra.MaximumNArgs(1),
		Run: func(_ *cobra.Command, args []string) {
			dir := defaultSchema
			if len(args) == 1 {
				dir = args[0]
			}
			c.code = cmdVet(dir, asJSON, c.out, c.errw)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	return cmd
}

func cmdVet(dir string, asJSONv bool, stdout, stderr io.Writer) int {
	asJSON := &asJSONv
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
