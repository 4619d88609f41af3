package main

import (
	"bytes"
	"fmt"
	"io"
	"os/exec"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/writ-dev/writ/schema/ir"
	"github.com/writ-dev/writ/schema/load"
)

type graphOptions struct {
	schema, format, machine string
}

func (c *cli) graphCmd() *cobra.Command {
	var o graphOptions
	cmd := &cobra.Command{
		Use:   "graph [--schema DIR] [--format dot|svg|mermaid] [--machine NAME]",
		Short: "draw each machine's states and transitions, with the entry types that drive each transition as edge labels",
		Long: `Draw each machine's states and transitions as a diagram. An edge is
labelled with the entry types whose declared target can be its end state
(type:value where the target comes from a mapped payload field). Initial
states are entered from a start point, terminal states are double circles.

dot prints Graphviz source and needs nothing installed; svg runs Graphviz's
dot (on PATH) over it; mermaid prints a Mermaid stateDiagram-v2.`,
		Args: noArgsFix("use --schema DIR"),
		Run:  func(*cobra.Command, []string) { c.code = cmdGraph(o, c.out, c.errw) },
	}
	fl := cmd.Flags()
	fl.StringVar(&o.schema, "schema", defaultSchema, "directory holding the CUE schema package")
	fl.StringVar(&o.format, "format", "dot", "output format: dot, svg (needs Graphviz dot on PATH) or mermaid")
	fl.StringVar(&o.machine, "machine", "", "draw only this machine (default: all)")
	return cmd
}

func cmdGraph(o graphOptions, stdout, stderr io.Writer) int {
	switch o.format {
	case "dot", "svg", "mermaid":
	default:
		fmt.Fprintf(stderr, "writ schema graph: --format %q is not known (fix: use dot, svg or mermaid)\n", o.format)
		return 2
	}
	res, err := load.Dir(o.schema)
	if err != nil {
		fmt.Fprintf(stderr, "writ schema graph: %v\n", err)
		return 1
	}
	if res.Failed() {
		printFindings(stderr, res.Findings, true)
		fmt.Fprintf(stderr, "writ schema graph: %s does not load (fix: run `writ vet %s`)\n", o.schema, o.schema)
		return 1
	}
	graphs := machineGraphs(res.Schema)
	if o.machine != "" {
		var only []machineGraph
		var names []string
		for _, g := range graphs {
			names = append(names, g.m.Name)
			if g.m.Name == o.machine {
				only = append(only, g)
			}
		}
		if len(only) == 0 {
			fmt.Fprintf(stderr, "writ schema graph: --machine %q is not declared (fix: use one of %s)\n", o.machine, strings.Join(names, ", "))
			return 2
		}
		graphs = only
	}
	if len(graphs) == 0 {
		fmt.Fprintf(stderr, "writ schema graph: %s declares no machines\n", o.schema)
		return 1
	}
	switch o.format {
	case "mermaid":
		_, _ = io.WriteString(stdout, renderMermaid(graphs))
	case "dot":
		_, _ = io.WriteString(stdout, renderDot(graphs))
	case "svg":
		dot, err := exec.LookPath("dot")
		if err != nil {
			fmt.Fprintln(stderr, "writ schema graph: --format svg needs Graphviz's dot on PATH (fix: install graphviz, e.g. `apt-get install -y graphviz`, or use --format dot)")
			return 1
		}
		cmd := exec.Command(dot, "-Tsvg")
		cmd.Stdin = strings.NewReader(renderDot(graphs))
		var errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = stdout, &errb
		if err := cmd.Run(); err != nil {
			fmt.Fprintf(stderr, "writ schema graph: %s -Tsvg: %v: %s\n", dot, err, strings.TrimSpace(errb.String()))
			return 1
		}
	}
	return 0
}

// machineGraph is one machine with the labels of its edges.
type machineGraph struct {
	m *ir.Machine
	// edge "from\x00to" → the entry types that drive it
	labels map[string][]string
	// entry lists the types that create an instance in each initial state.
	entry map[string][]string
}

// machineGraphs derives, for every machine, which entry types can drive
// each declared transition: a type drives from → to when its declared
// target can be to (a fixed state, a mapped field value, or a field whose
// enum holds the state).
func machineGraphs(s *ir.Schema) []machineGraph {
	var out []machineGraph
	for _, m := range s.Machines {
		g := machineGraph{m: m, labels: map[string][]string{}, entry: map[string][]string{}}
		drives := map[string][]string{} // state → labels of types that target it
		for _, e := range s.Entries {
			if e.Machine != m.Name {
				continue
			}
			for _, t := range targets(e) {
				drives[t.state] = append(drives[t.state], t.label)
			}
		}
		for _, from := range m.States {
			for _, to := range m.Transitions[from] {
				g.labels[from+"\x00"+to] = drives[to]
			}
		}
		for _, st := range m.Initial {
			g.entry[st] = drives[st]
		}
		out = append(out, g)
	}
	return out
}

type target struct{ state, label string }

func targets(e *ir.Entry) []target {
	switch {
	case e.ToState != "":
		return []target{{e.ToState, e.Name}}
	case e.ToMap != nil:
		vals := make([]string, 0, len(e.ToMap))
		for v := range e.ToMap {
			vals = append(vals, v)
		}
		sort.Strings(vals)
		var ts []target
		for _, v := range vals {
			ts = append(ts, target{e.ToMap[v], e.Name + ":" + v})
		}
		return ts
	case e.To != "":
		f, ok := e.Field(e.To)
		if !ok {
			return nil
		}
		var ts []target
		for _, v := range f.Enum {
			ts = append(ts, target{v, e.Name})
		}
		return ts
	}
	return nil
}

func renderDot(gs []machineGraph) string {
	var b strings.Builder
	b.WriteString("// Generated by writ schema graph.\ndigraph machines {\n")
	b.WriteString("  rankdir=LR;\n  fontname=\"Helvetica\";\n  node [shape=circle, fontname=\"Helvetica\", fontsize=11];\n  edge [fontname=\"Helvetica\", fontsize=9];\n")
	for _, g := range gs {
		m := g.m
		id := func(st string) string { return strconv.Quote(m.Name + "." + st) }
		fmt.Fprintf(&b, "  subgraph %s {\n    label=%s;\n", strconv.Quote("cluster_"+m.Name), strconv.Quote("machine "+m.Name+" (key "+m.Key+")"))
		start := strconv.Quote(m.Name + ".__start")
		if len(m.Initial) > 0 {
			fmt.Fprintf(&b, "    %s [shape=point, width=0.15, label=\"\"];\n", start)
		}
		for _, st := range m.States {
			shape := "circle"
			if m.IsTerminal(st) {
				shape = "doublecircle"
			}
			fmt.Fprintf(&b, "    %s [label=%s, shape=%s];\n", id(st), strconv.Quote(st), shape)
		}
		for _, st := range m.Initial {
			fmt.Fprintf(&b, "    %s -> %s%s;\n", start, id(st), dotLabel(g.entry[st]))
		}
		for _, from := range m.States {
			for _, to := range m.Transitions[from] {
				fmt.Fprintf(&b, "    %s -> %s%s;\n", id(from), id(to), dotLabel(g.labels[from+"\x00"+to]))
			}
		}
		b.WriteString("  }\n")
	}
	b.WriteString("}\n")
	return b.String()
}

func dotLabel(types []string) string {
	if len(types) == 0 {
		return ""
	}
	return " [label=" + strconv.Quote(strings.Join(types, "\n")) + "]"
}

func renderMermaid(gs []machineGraph) string {
	var b strings.Builder
	b.WriteString("%% Generated by writ schema graph.\nstateDiagram-v2\n")
	for _, g := range gs {
		m := g.m
		id := func(st string) string { return mermaidID(m.Name + "_" + st) }
		fmt.Fprintf(&b, "  state %q as %s {\n", "machine "+m.Name+" (key "+m.Key+")", mermaidID(m.Name))
		for _, st := range m.States {
			fmt.Fprintf(&b, "    state %q as %s\n", st, id(st))
		}
		for _, st := range m.Initial {
			fmt.Fprintf(&b, "    [*] --> %s%s\n", id(st), mermaidLabel(g.entry[st]))
		}
		for _, from := range m.States {
			for _, to := range m.Transitions[from] {
				fmt.Fprintf(&b, "    %s --> %s%s\n", id(from), id(to), mermaidLabel(g.labels[from+"\x00"+to]))
			}
		}
		for _, st := range m.Terminal {
			fmt.Fprintf(&b, "    %s --> [*]\n", id(st))
		}
		b.WriteString("  }\n")
	}
	return b.String()
}

func mermaidLabel(types []string) string {
	if len(types) == 0 {
		return ""
	}
	return " : " + strings.Join(types, ", ")
}

// mermaidID keeps letters, digits and underscores (Mermaid state IDs).
func mermaidID(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' {
			return r
		}
		return '_'
	}, s)
}
