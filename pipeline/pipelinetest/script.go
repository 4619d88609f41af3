package pipelinetest

import (
	"bufio"
	"fmt"
	"os"
	"strings"
)

// ScriptCase is one command of a scenario script:
//
//	command key=value ...
//	optional input lines (a JSON payload)
//	----
//	expected output lines
//	(blank line)
type ScriptCase struct {
	Line     int
	Cmd      string
	Args     map[string]string
	ArgsRaw  string
	Input    string
	Expected string
	Comments []string
}

// ParseScript reads a scenario script.
func ParseScript(path string) ([]ScriptCase, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var cases []ScriptCase
	var comments []string
	line := 0
	for sc.Scan() {
		line++
		t := sc.Text()
		if strings.TrimSpace(t) == "" {
			continue
		}
		if strings.HasPrefix(t, "#") {
			comments = append(comments, t)
			continue
		}
		c := ScriptCase{Line: line, Args: map[string]string{}, Comments: comments}
		comments = nil
		fields := strings.Fields(t)
		c.Cmd = fields[0]
		c.ArgsRaw = strings.TrimSpace(strings.TrimPrefix(t, c.Cmd))
		for _, a := range fields[1:] {
			k, v, ok := strings.Cut(a, "=")
			if !ok {
				v = "true"
			}
			c.Args[k] = strings.Trim(v, `"`)
		}
		var in []string
		sep := false
		for sc.Scan() {
			line++
			if sc.Text() == "----" {
				sep = true
				break
			}
			in = append(in, sc.Text())
		}
		if !sep {
			return nil, fmt.Errorf("%s:%d: missing ---- after command %q", path, c.Line, c.Cmd)
		}
		c.Input = strings.Join(in, "\n")
		var exp []string
		for sc.Scan() {
			line++
			if sc.Text() == "" {
				break
			}
			exp = append(exp, sc.Text())
		}
		c.Expected = strings.Join(exp, "\n")
		cases = append(cases, c)
	}
	return cases, sc.Err()
}

// FormatScript renders cases back to script text (for -rewrite).
func FormatScript(cases []ScriptCase, outputs []string) string {
	var b strings.Builder
	for i, c := range cases {
		for _, cm := range c.Comments {
			b.WriteString(cm + "\n")
		}
		b.WriteString(c.Cmd)
		if c.ArgsRaw != "" {
			b.WriteString(" " + c.ArgsRaw)
		}
		b.WriteString("\n")
		if c.Input != "" {
			b.WriteString(c.Input + "\n")
		}
		b.WriteString("----\n")
		if outputs[i] != "" {
			b.WriteString(outputs[i] + "\n")
		}
		b.WriteString("\n")
	}
	return b.String()
}
