package load

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/build"
	"cuelang.org/go/cue/cuecontext"
	cueerrors "cuelang.org/go/cue/errors"
	"cuelang.org/go/cue/parser"
	"cuelang.org/go/cue/token"

	"github.com/writ-dev/writ/schema"
	"github.com/writ-dev/writ/schema/ir"
)

// Result is a loaded schema: the model (nil when a failing finding kept it
// from being built), every finding, and the CUE value it came from.
type Result struct {
	Schema   *ir.Schema
	Findings []ir.Finding
	// Value is the user's schema unified with the meta-schema's #Schema.
	Value cue.Value
	// user is the schema as declared, before unification with the
	// meta-schema (whose payload: {...} would leave payloads open).
	user cue.Value
}

// Failed reports whether any finding is BLOCKED or INCOMPLETE.
func (r *Result) Failed() bool { return ir.AnyFails(r.Findings) }

// Err returns an error listing every failing finding, or nil.
func (r *Result) Err() error {
	var msgs []string
	for _, f := range r.Findings {
		if f.Fails() {
			msgs = append(msgs, f.String())
		}
	}
	if len(msgs) == 0 {
		return nil
	}
	return fmt.Errorf("load: schema has %d error(s):\n%s", len(msgs), strings.Join(msgs, "\n"))
}

// PayloadValue returns the CUE value of an entry type's payload, closed, so
// that unifying it with concrete data gives CUE's own verdict on that data.
func (r *Result) PayloadValue(entry string) (cue.Value, error) {
	p := r.user.LookupPath(cue.MakePath(cue.Str("entries"), cue.Str(entry), cue.Str("payload")))
	if !p.Exists() {
		return cue.Value{}, fmt.Errorf("load: no entry type %q", entry)
	}
	ctx := cuecontext.New()
	scope := ctx.CompileString("{}").FillPath(cue.ParsePath("p"), p)
	d := ctx.CompileString("#P: p", cue.Scope(scope))
	if err := d.Err(); err != nil {
		return cue.Value{}, fmt.Errorf("load: closing payload of %q: %w", entry, err)
	}
	return d.LookupPath(cue.ParsePath("#P")), nil
}

// Dir loads every .cue file directly inside dir. File names in positions are
// dir joined with the base name, as given.
func Dir(dir string) (*Result, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("load: schema directory %s: %w (fix: run from the repository root or pass the directory holding the schema's .cue files)", dir, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("load: %s is not a directory (fix: pass the directory holding the schema's .cue files)", dir)
	}
	return FS(os.DirFS(dir), ".", dir)
}

// FS loads every .cue file directly inside root of fsys. display prefixes
// file names in positions (e.g. "examples/jobs/schema").
func FS(fsys fs.FS, root, display string) (*Result, error) {
	ents, err := fs.ReadDir(fsys, root)
	if err != nil {
		return nil, fmt.Errorf("load: reading schema %s: %w", display, err)
	}
	var files []File
	for _, e := range ents {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".cue") {
			continue
		}
		b, err := fs.ReadFile(fsys, path.Join(root, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("load: %w", err)
		}
		name := e.Name()
		if display != "" {
			name = filepath.ToSlash(filepath.Join(display, e.Name()))
		}
		files = append(files, File{Name: name, Src: b})
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("load: no .cue files in %s (fix: point at the directory holding the schema package)", display)
	}
	return Files(files), nil
}

// File is one named CUE source.
type File struct {
	Name string
	Src  []byte
}

// Files loads a package made of the given sources.
func Files(files []File) *Result {
	files = append([]File(nil), files...)
	sort.Slice(files, func(i, j int) bool { return files[i].Name < files[j].Name })
	r := &Result{}
	ctx := cuecontext.New()
	inst := build.NewContext().NewInstance("", nil)
	for _, f := range files {
		af, err := parser.ParseFile(f.Name, f.Src, parser.ParseComments)
		if err != nil {
			r.addCUE(err, "fix the CUE syntax")
			continue
		}
		if err := inst.AddSyntax(af); err != nil {
			r.addCUE(err, "every file must belong to the same CUE package")
		}
	}
	if r.Failed() {
		return r
	}
	user := ctx.BuildInstance(inst)
	if err := user.Err(); err != nil {
		r.addCUE(err, "fix the CUE error at the position shown")
		return r
	}
	metaV := ctx.CompileBytes(schema.Meta(), cue.Filename(metaName))
	if err := metaV.Err(); err != nil {
		r.addCUE(err, "the embedded meta-schema is broken; rebuild writ")
		return r
	}
	// Class presence is checked before the meta-schema so that a missing
	// class is reported as what it is.
	badClass := r.checkClasses(user)
	r.user = user
	unified := user.Unify(metaV.LookupPath(cue.ParsePath("#Schema")))
	r.Value = unified
	if err := unified.Validate(); err != nil {
		for _, e := range cueerrors.Errors(err) {
			p := e.Path()
			if len(p) >= 3 && p[0] == "entries" && p[len(p)-1] == "class" && badClass[unquote(p[1])] {
				continue
			}
			r.addCUEOne(e, ir.CodeSchemaInvalid, "make the declaration match the writ meta-schema (see docs/schema.md)")
		}
	}
	if metaFailed(r.Findings) {
		ir.SortFindings(r.Findings)
		return r
	}
	// Class findings do not stop the build: the model is still checked, so
	// one run reports every problem.
	b := &builder{r: r}
	s := b.schema(unified)
	for _, f := range s.Check() {
		if f.Code == ir.CodeUnclassifiedType && badClass[strings.TrimPrefix(f.Subject, "entries.")] {
			continue // already reported (missing or unknown class)
		}
		r.Findings = append(r.Findings, f)
	}
	ir.SortFindings(r.Findings)
	dedupe(r)
	if !r.Failed() {
		r.Schema = s
	}
	return r
}

func metaFailed(fs []ir.Finding) bool {
	for _, f := range fs {
		if f.Fails() && f.Code != ir.CodeUnclassifiedType && f.Code != ir.CodeUnknownClass {
			return true
		}
	}
	return false
}

func unquote(s string) string {
	if u, err := strconv.Unquote(s); err == nil {
		return u
	}
	return s
}

func dedupe(r *Result) {
	out := r.Findings[:0]
	for i, f := range r.Findings {
		if i > 0 && f == r.Findings[i-1] {
			continue
		}
		out = append(out, f)
	}
	r.Findings = out
}

func (r *Result) checkClasses(user cue.Value) map[string]bool {
	bad := map[string]bool{}
	ents := user.LookupPath(cue.ParsePath("entries"))
	it, err := ents.Fields()
	if err != nil {
		return bad
	}
	for it.Next() {
		name := it.Selector().Unquoted()
		ev := it.Value()
		cv := ev.LookupPath(cue.ParsePath("class"))
		fix := `add class: "request" | "fact" | "receipt" | "config"`
		if !cv.Exists() {
			bad[name] = true
			r.Findings = append(r.Findings, ir.Finding{Code: ir.CodeUnclassifiedType, Status: ir.StatusBlocked,
				Pos: pos(ev.Pos()), Subject: "entries." + name, Fix: fix,
				Msg: fmt.Sprintf("entry type %q has no class", name)})
			continue
		}
		s, err := cv.String()
		if _, ok := ir.ParseClass(s); err != nil || !ok {
			bad[name] = true
			got := fmt.Sprint(cv)
			r.Findings = append(r.Findings, ir.Finding{Code: ir.CodeUnknownClass, Status: ir.StatusBlocked,
				Pos: pos(cv.Pos()), Subject: "entries." + name, Fix: fix,
				Msg: fmt.Sprintf("entry type %q has class %s, which is not a writ class", name, got)})
		}
	}
	return bad
}

func (r *Result) addCUE(err error, fix string) {
	for _, e := range cueerrors.Errors(err) {
		r.addCUEOne(e, ir.CodeCUEError, fix)
	}
}

// metaName is the file name positions inside the meta-schema carry.
const metaName = "writ-meta-schema.cue"

func (r *Result) addCUEOne(e cueerrors.Error, code, fix string) {
	// Prefer a position in the user's files over one in the meta-schema.
	var p token.Pos
	for _, c := range append([]token.Pos{e.Position()}, cueerrors.Positions(e)...) {
		if c.IsValid() && c.Filename() != metaName {
			p = c
			break
		}
	}
	if !p.IsValid() && r.user.Exists() && len(e.Path()) > 0 {
		sels := make([]cue.Selector, 0, len(e.Path()))
		for _, el := range e.Path() {
			if n, err := strconv.Atoi(el); err == nil {
				sels = append(sels, cue.Index(n))
			} else {
				sels = append(sels, cue.Str(unquote(el)))
			}
		}
		for len(sels) > 0 && !p.IsValid() {
			p = r.user.LookupPath(cue.MakePath(sels...)).Pos()
			sels = sels[:len(sels)-1]
		}
	}
	if !p.IsValid() {
		p = e.Position()
	}
	format, args := e.Msg()
	msg := fmt.Sprintf(format, args...)
	if path := e.Path(); len(path) > 0 {
		msg = strings.Join(path, ".") + ": " + msg
	}
	r.Findings = append(r.Findings, ir.Finding{Code: code, Status: ir.StatusBlocked, Pos: pos(p), Msg: msg, Fix: fix})
}

func pos(p token.Pos) ir.Pos {
	if !p.IsValid() {
		return ir.Pos{}
	}
	return ir.Pos{File: p.Filename(), Line: p.Line(), Col: p.Column()}
}
