package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/writ-dev/writ/examples/jobs/jobsgen"
	"github.com/writ-dev/writ/schema/ir"
	"github.com/writ-dev/writ/schema/load"
	"github.com/writ-dev/writ/schema/runtimecat"
)

// cmdTable prints the classification table: of the generated jobs catalog
// by default, or of any schema directory through the runtime catalog (the
// one `writd --schema DIR` serves).
func (c *cli) tableCmd() *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:   "table [--schema DIR]",
		Short: "print the classification table of the embedded jobs schema, or of any schema directory (through the runtime catalog)",
		Args:  noArgsFix("use --schema DIR"),
		Run:   func(*cobra.Command, []string) { c.code = cmdTable(dir, c.out, c.errw) },
	}
	cmd.Flags().StringVar(&dir, "schema", "", "print the table of the CUE schema package in this directory (default: the generated jobs catalog)")
	return cmd
}

func cmdTable(dir string, stdout, stderr io.Writer) int {
	schemaDir := &dir
	if *schemaDir == "" {
		cat := jobsgen.Catalog()
		fmt.Fprintf(stdout, "jobs schema %s\n\n", cat.Fingerprint())
		printTable(stdout, cat)
		return 0
	}
	res, err := load.Dir(*schemaDir)
	if err != nil {
		fmt.Fprintf(stderr, "writ table: %v\n", err)
		return 1
	}
	if res.Failed() {
		printFindings(stderr, res.Findings, true)
		fmt.Fprintf(stderr, "writ table: %s has BLOCKED/INCOMPLETE findings (fix: correct them; `writ vet %s` lists them all)\n", *schemaDir, *schemaDir)
		return 1
	}
	cat, err := runtimecat.New(res.Schema)
	if err != nil {
		fmt.Fprintf(stderr, "writ table: %s: %v\n", *schemaDir, err)
		return 1
	}
	fmt.Fprintf(stdout, "schema %s %s\n\n", *schemaDir, cat.Fingerprint())
	printTable(stdout, cat)
	return 0
}

func printTable(stdout io.Writer, cat ir.Catalog) {
	tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NO\tTYPE\tCLASS\tMACHINE\tTARGET\tORDER\tID\tKEYS")
	for _, d := range cat.Types() {
		e := d.Entry
		target := "-"
		switch {
		case e.ToState != "":
			target = e.ToState
		case e.ToMap != nil:
			f, _ := e.Field(e.To)
			var parts []string
			for _, v := range f.Enum {
				if st, ok := e.ToMap[v]; ok {
					parts = append(parts, v+"→"+st)
				}
			}
			target = strings.Join(parts, " ")
		case e.To != "":
			target = "field " + e.To
		case e.Item != "":
			target = "items: " + e.Item
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", d.Number, d.Name, d.Class, dash(e.Machine), target, dash(e.Order), dash(e.ID), dash(strings.Join(e.Keys, " ")))
	}
	tw.Flush()
	for _, m := range cat.Schema().Machines {
		fmt.Fprintf(stdout, "\nmachine %s (key %s) initial %v terminal %v\n", m.Name, m.Key, m.Initial, m.Terminal)
		for _, from := range m.States {
			if tos := m.Transitions[from]; len(tos) > 0 {
				fmt.Fprintf(stdout, "  %-10s → %s\n", from, strings.Join(tos, ", "))
			}
		}
	}
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
