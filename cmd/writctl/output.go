package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"unicode"

	"go.yaml.in/yaml/v3"
)

// Output formats of the global -o flag. text is the human summary each
// command prints; json, yaml and table are the same structured record in
// three renderings (json: one compact object per line; yaml: one document
// per record, "---" between records of a stream; table: the record's
// fields as KEY VALUE rows, and every list of records in it as a table with
// one column per field).
const (
	outText  = "text"
	outJSON  = "json"
	outYAML  = "yaml"
	outTable = "table"
)

var outputFormats = []string{outText, outJSON, outYAML, outTable}

func checkOutput(o string) error {
	for _, f := range outputFormats {
		if o == f {
			return nil
		}
	}
	return fail(exitUsage, "-o %q: use -o %s", o, strings.Join(outputFormats, ", -o "))
}

// structured reports whether the command prints its structured record
// (json, yaml or table) rather than the text summary.
func (a *app) structured() bool { return a.output != outText }

// emitJSON prints one structured record, given as JSON, in the selected
// format.
func (a *app) emitJSON(b []byte) error {
	a.records++
	switch a.output {
	case outYAML:
		y, err := jsonToYAML(b)
		if err != nil {
			return fmt.Errorf("writctl: yaml output: %w", err)
		}
		if a.records > 1 {
			y = append([]byte("---\n"), y...)
		}
		_, err = a.out.Write(y)
		return err
	case outTable:
		n, err := parseJSONNode(b)
		if err != nil {
			return fmt.Errorf("writctl: table output: %w", err)
		}
		if a.records > 1 {
			fmt.Fprintln(a.out)
		}
		return renderTable(a.out, n)
	}
	_, err := fmt.Fprintln(a.out, string(b))
	return err
}

// parseJSONNode parses one JSON value into a YAML node tree that keeps the
// fields in their JSON order. It reads the JSON with encoding/json rather
// than the YAML parser, which refuses characters JSON allows raw (DEL, C1).
func parseJSONNode(b []byte) (*yaml.Node, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	n, err := jsonNodeFrom(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("not one JSON value")
	}
	return n, nil
}

func jsonNodeFrom(dec *json.Decoder) (*yaml.Node, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch v := tok.(type) {
	case json.Delim:
		n := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
		if v == '{' {
			n = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
		}
		for dec.More() {
			if n.Kind == yaml.MappingNode {
				k, err := dec.Token()
				if err != nil {
					return nil, err
				}
				key := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: k.(string)}
				if key.Value == "<<" { // plain, it would be YAML's merge key
					key.Style = yaml.DoubleQuotedStyle
				}
				n.Content = append(n.Content, key)
			}
			c, err := jsonNodeFrom(dec)
			if err != nil {
				return nil, err
			}
			n.Content = append(n.Content, c)
		}
		if _, err := dec.Token(); err != nil { // the closing delimiter
			return nil, err
		}
		return n, nil
	case string:
		n := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: v}
		if strings.IndexFunc(v, func(r rune) bool { return r != '\n' && unicode.IsControl(r) }) >= 0 {
			// The encoder may put a tab into a block scalar, which YAML
			// parsers (its own included) refuse: quote and escape instead.
			n.Style = yaml.DoubleQuotedStyle
		}
		return n, nil
	case json.Number:
		tag, val := "!!int", string(v)
		if strings.ContainsAny(val, ".eE") {
			tag = "!!float"
		}
		if val == "-0" { // as a YAML int it would read back as 0
			tag, val = "!!float", "-0.0"
		}
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Value: val}, nil
	case bool:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: fmt.Sprint(v)}, nil
	case nil:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null"}, nil
	}
	return nil, fmt.Errorf("unexpected JSON token %v", tok)
}

// jsonToYAML re-renders a JSON value as block-style YAML. Strings stay
// strings: the encoder quotes any that would read back as another type.
func jsonToYAML(b []byte) ([]byte, error) {
	n, err := parseJSONNode(b)
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	enc := yaml.NewEncoder(&out)
	enc.SetIndent(2)
	if err := enc.Encode(n); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

func isRecordList(n *yaml.Node) bool {
	if n.Kind != yaml.SequenceNode || len(n.Content) == 0 {
		return false
	}
	for _, c := range n.Content {
		if c.Kind != yaml.MappingNode {
			return false
		}
	}
	return true
}

// renderTable prints a record as KEY VALUE rows followed by one table per
// list of records in it, or a list of records as one table.
func renderTable(out io.Writer, n *yaml.Node) error {
	switch {
	case n.Kind == yaml.SequenceNode && len(n.Content) == 0:
		_, err := fmt.Fprintln(out, "(none)")
		return err
	case isRecordList(n):
		return renderRows(out, n.Content)
	case n.Kind != yaml.MappingNode:
		_, err := fmt.Fprintln(out, cell(n))
		return err
	}
	var lists [][2]*yaml.Node
	var rows []string
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if isRecordList(v) {
			lists = append(lists, [2]*yaml.Node{k, v})
			continue
		}
		rows = append(rows, flat(k.Value)+"\t"+cell(v))
	}
	if len(rows) > 0 {
		w := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
		fmt.Fprintln(w, "FIELD\tVALUE")
		for _, r := range rows {
			fmt.Fprintln(w, r)
		}
		if err := w.Flush(); err != nil {
			return err
		}
	}
	for i, l := range lists {
		if i > 0 || len(rows) > 0 {
			fmt.Fprintln(out)
		}
		fmt.Fprintf(out, "%s (%d):\n", flat(l[0].Value), len(l[1].Content))
		if err := renderRows(out, l[1].Content); err != nil {
			return err
		}
	}
	return nil
}

// renderRows prints records as a table: one column per field (in order of
// first appearance), one row per record, "-" for a field a record lacks.
func renderRows(out io.Writer, rows []*yaml.Node) error {
	var cols []string
	seen := map[string]bool{}
	for _, r := range rows {
		for i := 0; i+1 < len(r.Content); i += 2 {
			if k := r.Content[i].Value; !seen[k] {
				seen[k] = true
				cols = append(cols, k)
			}
		}
	}
	w := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	hdr := make([]string, len(cols))
	for i, c := range cols {
		hdr[i] = strings.ToUpper(flat(c))
	}
	fmt.Fprintln(w, strings.Join(hdr, "\t"))
	for _, r := range rows {
		vals := map[string]string{}
		for i := 0; i+1 < len(r.Content); i += 2 {
			vals[r.Content[i].Value] = cell(r.Content[i+1])
		}
		line := make([]string, len(cols))
		for i, c := range cols {
			v, ok := vals[c]
			if !ok {
				v = "-"
			}
			line[i] = v
		}
		fmt.Fprintln(w, strings.Join(line, "\t"))
	}
	return w.Flush()
}

// cell renders one value on one line: a scalar as is ("-" when empty), a
// list of scalars comma-separated, anything else as compact JSON.
func cell(n *yaml.Node) string {
	var s string
	switch n.Kind {
	case yaml.ScalarNode:
		s = n.Value
	case yaml.SequenceNode:
		parts := make([]string, 0, len(n.Content))
		for _, c := range n.Content {
			if c.Kind != yaml.ScalarNode {
				return compactJSON(n)
			}
			parts = append(parts, c.Value)
		}
		s = strings.Join(parts, ",")
	default:
		return compactJSON(n)
	}
	if s == "" {
		return "-"
	}
	return flat(s)
}

// flat keeps a table cell on one line and in one column: every control
// character (tab, newline, and the \v and \f that tabwriter also treats as
// cell and line ends) becomes a space.
func flat(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
}

func compactJSON(n *yaml.Node) string {
	var v any
	if err := n.Decode(&v); err != nil {
		return "?"
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "?"
	}
	return string(b)
}
