package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/writ-dev/writ/examples/jobs/jobsgen"
)

func cmdTable(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		fmt.Fprintln(stderr, "writ table: takes no arguments")
		return 2
	}
	cat := jobsgen.Catalog()
	fmt.Fprintf(stdout, "jobs schema %s\n\n", cat.Fingerprint())
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
				parts = append(parts, v+"→"+e.ToMap[v])
			}
			target = strings.Join(parts, " ")
		case e.To != "":
			target = "field " + e.To
		case e.Item != "":
			target = "items: " + e.Item
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", d.Number, d.Name, d.Class, dash(e.Machine), target, dash(e.Order), dash(e.ID), strings.Join(e.Keys, " "))
	}
	tw.Flush()
	fmt.Fprintln(stdout)
	for _, name := range []string{"job", "worker", "queue"} {
		m, ok := cat.Machine(name)
		if !ok {
			continue
		}
		fmt.Fprintf(stdout, "machine %s (key %s) initial %v terminal %v\n", m.Name, m.Key, m.Initial, m.Terminal)
		for _, from := range m.States {
			if tos := m.Transitions[from]; len(tos) > 0 {
				fmt.Fprintf(stdout, "  %-10s → %s\n", from, strings.Join(tos, ", "))
			}
		}
	}
	return 0
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
