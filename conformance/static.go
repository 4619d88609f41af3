package conformance

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/writ-dev/writ/schema/gen"
	"github.com/writ-dev/writ/schema/ir"
	"github.com/writ-dev/writ/schema/load"
)

func init() {
	register(&Check{ID: "static.schema-loads", Tier: TierStatic, Invariants: []string{"W6"},
		Title: "the schema parses, matches the meta-schema and every constraint compiles", Run: checkSchemaLoads})
	register(&Check{ID: "static.classified", Tier: TierStatic, Invariants: []string{"W6"},
		Title: "every declared entry type has a class", Run: checkClassified})
	register(&Check{ID: "static.class-known", Tier: TierStatic, Invariants: []string{"W6"},
		Title: "every class is request, fact, receipt or config", Run: checkClassKnown})
	register(&Check{ID: "static.table-complete", Tier: TierStatic, Invariants: []string{"W6"},
		Title: "the generated classification table covers exactly the declared types", Run: checkTableComplete})
	register(&Check{ID: "static.gen-fresh", Tier: TierStatic, Invariants: []string{"W6"},
		Title: "generated code is fresh for this schema", Run: checkGenFresh})
	register(&Check{ID: "static.guard-states", Tier: TierStatic, Invariants: []string{"W8"},
		Title: "every guard and target names declared states", Run: checkGuardStates})
	register(&Check{ID: "static.reachable", Tier: TierStatic, Invariants: []string{"W8"},
		Title: "every state is reachable from an initial state", Run: checkReachable})
	register(&Check{ID: "static.terminal-exits", Tier: TierStatic, Invariants: []string{"W8"},
		Title: "terminal states have no exits", Run: checkTerminalExits})
	register(&Check{ID: "static.fact-id", Tier: TierStatic, Invariants: []string{"W3", "W9"},
		Title: "every fact type has an idempotency key", Run: checkFactID})
	register(&Check{ID: "static.plugin-types", Tier: TierStatic, Invariants: []string{"W6", "W7"},
		Title: "the plugin serves exactly the evaluated types, built against this schema", Run: checkPluginTypes})
}

// loaderCodes are the findings each static check owns; the rest belong to
// static.schema-loads.
var loaderCodes = map[string]string{
	ir.CodeUnclassifiedType:  "static.classified",
	ir.CodeUnknownClass:      "static.class-known",
	ir.CodeGuardUnknownState: "static.guard-states",
	ir.CodeNoTransition:      "static.guard-states",
	ir.CodeUnreachableState:  "static.reachable",
	ir.CodeTerminalHasExit:   "static.terminal-exits",
	ir.CodeFactWithoutID:     "static.fact-id",
}

func fromIR(f ir.Finding) Finding {
	pos := ""
	if f.Pos.File != "" {
		pos = f.Pos.String()
	}
	return Finding{Code: f.Code, Status: f.Status, Subject: f.Subject, Pos: pos, Message: f.Msg, Fix: f.Fix}
}

// loaderFindings returns the loader's findings owned by check id.
func (e *Env) loaderFindings(id string) []Finding {
	var out []Finding
	if e.Load == nil {
		return nil
	}
	for _, f := range e.Load.Findings {
		owner, ok := loaderCodes[f.Code]
		if !ok {
			owner = "static.schema-loads"
		}
		if owner == id {
			out = append(out, fromIR(f))
		}
	}
	return out
}

// semanticsChecked reports whether the loader got as far as checking the
// model's semantics (it stops before that on CUE, meta-schema and class
// errors).
func (e *Env) semanticsChecked() bool {
	if e.Load == nil {
		return false
	}
	if e.Schema != nil {
		return true
	}
	for _, f := range e.Load.Findings {
		switch f.Code {
		case ir.CodeCUEError, ir.CodeSchemaInvalid, ir.CodeUnclassifiedType, ir.CodeUnknownClass:
			return false
		}
	}
	return true
}

func checkSchemaLoads(_ context.Context, e *Env) Outcome {
	if e.LoadErr != nil {
		return Outcome{Findings: []Finding{{Code: ir.CodeCUEError, Status: ir.StatusBlocked, Subject: e.Opts.SchemaDir,
			Message: e.LoadErr.Error(), Fix: "point --schema at the directory holding the schema's .cue files"}}}
	}
	return Outcome{Findings: e.loaderFindings("static.schema-loads"), Cases: 1}
}

// classFindings: the loader checks classes before anything else, so these
// two checks run whenever the files parsed.
func classFindings(e *Env, id string) Outcome {
	if e.LoadErr != nil {
		return notRun("the schema could not be read: %v", e.LoadErr)
	}
	for _, f := range e.Load.Findings {
		if f.Code == ir.CodeCUEError {
			return notRun("the schema has CUE errors, so its entry types could not be enumerated (see static.schema-loads)")
		}
	}
	out := Outcome{Findings: e.loaderFindings(id)}
	if e.Schema != nil {
		out.Cases = len(e.Schema.Entries)
		for _, en := range e.Schema.Entries {
			if !en.Class.Valid() {
				out.Findings = append(out.Findings, Finding{Code: ir.CodeUnclassifiedType, Status: ir.StatusBlocked,
					Subject: "entries." + en.Name, Message: fmt.Sprintf("entry type %q has no valid class in the loaded model", en.Name),
					Fix: `add class: "request" | "fact" | "receipt" | "config"`})
			}
		}
	}
	return out
}

func checkClassified(_ context.Context, e *Env) Outcome { return classFindings(e, "static.classified") }
func checkClassKnown(_ context.Context, e *Env) Outcome {
	return classFindings(e, "static.class-known")
}

func checkTableComplete(_ context.Context, e *Env) Outcome {
	if r, ok := e.needCatalog(); !ok {
		return notRun("%s", r)
	}
	s, cat := e.Schema, e.Catalog
	var out Outcome
	add := func(code, subject, fix, format string, args ...any) {
		out.Findings = append(out.Findings, Finding{Code: code, Status: ir.StatusBlocked, Subject: subject,
			Message: fmt.Sprintf(format, args...), Fix: fix})
	}
	const regen = "run `writ gen` and rebuild"
	declared := map[string]bool{}
	for _, en := range s.Entries {
		out.Cases++
		declared[en.Name] = true
		subj := "entries." + en.Name
		td, ok := cat.Type(en.Name)
		if !ok || td == nil {
			add(CodeTableMissingType, subj, regen, "entry type %q is declared but missing from the generated classification table", en.Name)
			continue
		}
		if td.Class != en.Class {
			add(CodeTableMismatch, subj, regen, "entry type %q: generated class %s, declared %s", en.Name, td.Class, en.Class)
		}
		if !td.Class.Valid() {
			add(CodeTableMissingType, subj, regen, "entry type %q has no valid class in the generated table", en.Name)
		}
		if td.Number != en.Number {
			add(CodeTableMismatch, subj, regen, "entry type %q: generated number %d, declared %d", en.Name, td.Number, en.Number)
		}
		if bn, ok := cat.TypeByNumber(en.Number); !ok || bn == nil || bn.Name != en.Name {
			add(CodeTableMismatch, subj, regen, "entry type %q: type number %d does not resolve to it in the generated table", en.Name, en.Number)
		}
		want := ""
		if td.Machine != nil {
			want = td.Machine.Name
		}
		if want != en.Machine {
			add(CodeTableMismatch, subj, regen, "entry type %q: generated machine %q, declared %q", en.Name, want, en.Machine)
		}
		if td.ParseJSON == nil || td.ParseBinary == nil {
			add(CodeTableMismatch, subj, regen, "entry type %q has no generated payload codec", en.Name)
		}
	}
	for _, td := range cat.Types() {
		if td == nil || !declared[td.Name] {
			name := "<nil>"
			if td != nil {
				name = td.Name
			}
			add(CodeTableExtraType, "entries."+name, regen, "the generated table has entry type %q, which the schema does not declare", name)
		}
	}
	if n := len(cat.Types()); n != len(s.Entries) {
		add(CodeTableMismatch, "catalog", regen, "the generated table lists %d types; the schema declares %d", n, len(s.Entries))
	}
	for _, m := range s.Machines {
		gm, ok := cat.Machine(m.Name)
		switch {
		case !ok:
			add(CodeTableMismatch, "machines."+m.Name, regen, "machine %q is missing from the generated code", m.Name)
		case !slices.Equal(gm.States, m.States) || !slices.Equal(gm.Initial, m.Initial) || !slices.Equal(gm.Terminal, m.Terminal) || !sameTransitions(gm.Transitions, m.Transitions):
			add(CodeTableMismatch, "machines."+m.Name, regen, "machine %q: generated states or transitions differ from the schema", m.Name)
		}
	}
	return out
}

func sameTransitions(a, b map[string][]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !slices.Equal(v, b[k]) {
			return false
		}
	}
	return true
}

// genDir finds the directory of generated code for the schema: --gen, else
// <dir>/<go_package> or <dir>/../<go_package>, else the one directory next
// to (or inside) the schema directory that holds a catalog_gen.go.
func (e *Env) genDir() (string, []string) {
	if e.Opts.GenDir != "" {
		return e.Opts.GenDir, []string{e.Opts.GenDir}
	}
	var cands []string
	if pkg := e.Schema.Package; pkg != "" {
		cands = append(cands, filepath.Join(e.Dir, pkg), filepath.Join(filepath.Dir(e.Dir), pkg))
	} else {
		for _, parent := range []string{e.Dir, filepath.Dir(e.Dir)} {
			ents, _ := os.ReadDir(parent)
			for _, de := range ents {
				d := filepath.Join(parent, de.Name())
				if _, err := os.Stat(filepath.Join(d, "catalog_gen.go")); de.IsDir() && err == nil {
					cands = append(cands, d)
				}
			}
		}
		if len(cands) != 1 {
			return "", append(cands, filepath.Join(filepath.Dir(e.Dir), "*", "catalog_gen.go"))
		}
	}
	for _, c := range cands {
		if st, err := os.Stat(c); err == nil && st.IsDir() {
			return c, cands
		}
	}
	return "", cands
}

func checkGenFresh(_ context.Context, e *Env) Outcome {
	if r, ok := e.needSchema(); !ok {
		return notRun("%s", r)
	}
	dir, tried := e.genDir()
	if dir == "" {
		fix := "run `writ gen`, or pass --gen DIR"
		if e.Schema.Package == "" {
			fix = "set go_package in the schema or pass --gen DIR"
		}
		return Outcome{Findings: []Finding{{Code: CodeGenMissing, Status: ir.StatusIncomplete, Subject: e.Opts.SchemaDir,
			Message: fmt.Sprintf("no generated code found (looked in %s)", strings.Join(tried, ", ")), Fix: fix}}}
	}
	have := map[string][]byte{}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return Outcome{Findings: []Finding{{Code: CodeGenMissing, Status: ir.StatusIncomplete, Subject: dir, Message: err.Error(), Fix: "run `writ gen`"}}}
	}
	for _, de := range ents {
		if de.IsDir() || !strings.HasSuffix(de.Name(), "_gen.go") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, de.Name()))
		if err != nil {
			return Outcome{Findings: []Finding{{Code: CodeGenMissing, Status: ir.StatusIncomplete, Subject: de.Name(), Message: err.Error(), Fix: "make the generated files readable"}}}
		}
		have[de.Name()] = b
	}
	if len(have) == 0 {
		return Outcome{Findings: []Finding{{Code: CodeGenMissing, Status: ir.StatusIncomplete, Subject: filepath.ToSlash(dir),
			Message: "the directory holds no *_gen.go files", Fix: "run `writ gen`"}}}
	}
	// The generated header names the schema source; regenerate with the
	// same name so only real differences count.
	source := ""
	for _, name := range sortedKeys(have) {
		if s, ok := sourceLine(have[name]); ok {
			source = s
			break
		}
	}
	// Positions in generated code carry the file names as the generator
	// saw them; reload under the recorded source name so that only real
	// differences count.
	model := e.Schema
	if source != "" {
		res, err := load.FS(os.DirFS(e.Dir), ".", source)
		if err == nil && res.Schema != nil {
			model = res.Schema
		}
	}
	pkg := model.Package
	if pkg == "" {
		pkg = filepath.Base(dir)
	}
	want, err := gen.Generate(model, gen.Options{Package: pkg, Source: source})
	if err != nil {
		return Outcome{Findings: []Finding{{Code: CodeGenStale, Status: ir.StatusBlocked, Subject: e.Opts.SchemaDir,
			Message: fmt.Sprintf("the generator refuses this schema: %v", err), Fix: "fix the schema findings, then run `writ gen`"}}}
	}
	var out Outcome
	stale := func(name, msg string) {
		out.Findings = append(out.Findings, Finding{Code: CodeGenStale, Status: ir.StatusBlocked,
			Subject: filepath.ToSlash(filepath.Join(dir, name)), Message: msg, Fix: "run `writ gen` and commit the result"})
	}
	for _, name := range sortedKeys(want) {
		out.Cases++
		got, ok := have[name]
		switch {
		case !ok:
			stale(name, "generated file is missing")
		case !bytes.Equal(got, want[name]):
			stale(name, fmt.Sprintf("generated file is stale (first difference at line %d)", firstDiffLine(got, want[name])))
		}
	}
	for _, name := range sortedKeys(have) {
		if _, ok := want[name]; !ok {
			stale(name, "generated file is not produced by this schema any more")
		}
	}
	return out
}

func sourceLine(b []byte) (string, bool) {
	for _, line := range strings.SplitN(string(b), "\n", 4) {
		if s, ok := strings.CutPrefix(line, "// Source: "); ok {
			return strings.TrimSpace(s), true
		}
	}
	return "", false
}

func firstDiffLine(a, b []byte) int {
	la, lb := bytes.Split(a, []byte("\n")), bytes.Split(b, []byte("\n"))
	for i := 0; i < len(la) && i < len(lb); i++ {
		if !bytes.Equal(la[i], lb[i]) {
			return i + 1
		}
	}
	return min(len(la), len(lb)) + 1
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// needSemantics is the NOT RUN reason for checks over a model the loader
// never built.
func (e *Env) needSemantics() (string, bool) {
	if e.LoadErr != nil {
		return fmt.Sprintf("the schema could not be read: %v", e.LoadErr), false
	}
	if !e.semanticsChecked() {
		return "the schema did not load far enough for its machines to be checked (see static.schema-loads and static.classified)", false
	}
	return "", true
}

func checkGuardStates(_ context.Context, e *Env) Outcome {
	if r, ok := e.needSemantics(); !ok {
		return notRun("%s", r)
	}
	out := Outcome{Findings: e.loaderFindings("static.guard-states")}
	reported := map[string]bool{}
	for _, f := range out.Findings {
		reported[f.Subject] = true
	}
	s := e.Schema
	if s == nil {
		return out
	}
	// Independent re-verification over the model: every state an entry
	// can name must be a declared state of its machine.
	for _, en := range s.Entries {
		if en.Machine == "" {
			continue
		}
		m, ok := s.Machine(en.Machine)
		if !ok {
			continue // the loader reported WRIT_UNKNOWN_MACHINE
		}
		out.Cases++
		for _, st := range targetsOf(en) {
			if !m.HasState(st) && !reported["entries."+en.Name] {
				out.Findings = append(out.Findings, Finding{Code: ir.CodeGuardUnknownState, Status: ir.StatusBlocked,
					Subject: "entries." + en.Name, Message: fmt.Sprintf("entry type %q can move machine %q to %s, which it does not declare", en.Name, m.Name, st),
					Fix: fmt.Sprintf("declare %s in machines.%s.states or fix the target", st, m.Name)})
			}
		}
	}
	for _, m := range s.Machines {
		out.Cases++
		for from, tos := range m.Transitions {
			for _, to := range append([]string{from}, tos...) {
				if !m.HasState(to) && !reported["machines."+m.Name] {
					out.Findings = append(out.Findings, Finding{Code: ir.CodeGuardUnknownState, Status: ir.StatusBlocked,
						Subject: "machines." + m.Name, Message: fmt.Sprintf("machine %q: transition %s names undeclared state %s", m.Name, from, to),
						Fix: fmt.Sprintf("declare %s in machines.%s.states", to, m.Name)})
				}
			}
		}
	}
	return dedupe(out)
}

// targetsOf lists every target state an entry can name.
func targetsOf(en *ir.Entry) []string {
	switch {
	case en.ToState != "":
		return []string{en.ToState}
	case en.ToMap != nil:
		return sortedValues(en.ToMap)
	case en.To != "":
		if f, ok := en.Field(en.To); ok {
			return f.Enum
		}
	}
	return nil
}

func sortedValues(m map[string]string) []string {
	var vs []string
	for _, k := range sortedKeys(m) {
		vs = append(vs, m[k])
	}
	return vs
}

func checkReachable(_ context.Context, e *Env) Outcome {
	if r, ok := e.needSemantics(); !ok {
		return notRun("%s", r)
	}
	out := Outcome{Findings: e.loaderFindings("static.reachable")}
	for _, m := range e.machines() {
		out.Cases++
		reach := map[string]bool{}
		queue := slices.Clone(m.Initial)
		for len(queue) > 0 {
			st := queue[0]
			queue = queue[1:]
			if !reach[st] {
				reach[st] = true
				queue = append(queue, m.Transitions[st]...)
			}
		}
		for _, st := range m.States {
			if !reach[st] {
				out.Findings = append(out.Findings, Finding{Code: ir.CodeUnreachableState, Status: ir.StatusReviewRequired,
					Subject: "machines." + m.Name, Message: fmt.Sprintf("machine %q: state %s is not reachable from an initial state", m.Name, st),
					Fix: fmt.Sprintf("add a transition into %s or remove the state", st)})
			}
		}
	}
	return dedupe(out)
}

func checkTerminalExits(_ context.Context, e *Env) Outcome {
	if r, ok := e.needSemantics(); !ok {
		return notRun("%s", r)
	}
	out := Outcome{Findings: e.loaderFindings("static.terminal-exits")}
	for _, m := range e.machines() {
		out.Cases++
		for _, t := range m.Terminal {
			if exits := m.Transitions[t]; len(exits) > 0 {
				out.Findings = append(out.Findings, Finding{Code: ir.CodeTerminalHasExit, Status: ir.StatusBlocked,
					Subject: "machines." + m.Name, Message: fmt.Sprintf("machine %q: terminal state %s has outgoing transitions %v", m.Name, t, exits),
					Fix: fmt.Sprintf("remove transitions.%s or drop %s from terminal", t, t)})
			}
		}
	}
	return dedupe(out)
}

func checkFactID(_ context.Context, e *Env) Outcome {
	if r, ok := e.needSemantics(); !ok {
		return notRun("%s", r)
	}
	out := Outcome{Findings: e.loaderFindings("static.fact-id")}
	for _, en := range e.entries() {
		if en.Class != ir.ClassFact {
			continue
		}
		out.Cases++
		if en.ID == "" {
			out.Findings = append(out.Findings, Finding{Code: ir.CodeFactWithoutID, Status: ir.StatusIncomplete,
				Subject: "entries." + en.Name, Message: fmt.Sprintf("fact type %q has no idempotency key; duplicates cannot be recognised", en.Name),
				Fix: `add id: "<field>" naming a unique report ID field`})
		}
	}
	return dedupe(out)
}

// dedupe drops findings that the loader and the independent re-check both
// reported (same code and subject, same message modulo source).
func dedupe(o Outcome) Outcome {
	seen := map[string]bool{}
	var keep []Finding
	for _, f := range o.Findings {
		k := f.Code + "\x00" + f.Subject + "\x00" + f.Message
		if seen[k] {
			continue
		}
		seen[k] = true
		keep = append(keep, f)
	}
	o.Findings = keep
	return o
}

func (e *Env) machines() []*ir.Machine {
	if e.Schema == nil {
		return nil
	}
	return e.Schema.Machines
}

func (e *Env) entries() []*ir.Entry {
	if e.Schema == nil {
		return nil
	}
	return e.Schema.Entries
}
