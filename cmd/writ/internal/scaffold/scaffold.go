// Package scaffold writes a new control-plane project for `writ init`: a CUE
// schema with one entry type of each class and a machine, the Go package
// generated from it, a handler plugin with sdktest tests, a Makefile and a
// README. The templates are embedded in the writ binary.
package scaffold

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"go/format"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"slices"
	"strings"
	"text/template"

	"github.com/writ-dev/writ/schema/gen"
	"github.com/writ-dev/writ/schema/load"
)

//go:embed templates
var templates embed.FS

// GoVersion is the go directive of a scaffolded go.mod: the one writ's own
// module declares.
const GoVersion = "1.26.0"

// writModule is the module a scaffolded project requires.
const writModule = "github.com/writ-dev/writ"

// Options describes the project to write.
type Options struct {
	// Dir is the project directory: it must not exist or be empty.
	Dir string
	// Module is the Go module path (default example.com/<Name>).
	Module string
	// Name names the project: the CUE package, the plugin writ-<Name>, the
	// config type <Name>.config and the generated package <Name>gen.
	// Default: derived from Dir's base name.
	Name string
	// WritVersion is the writ module version the project requires
	// (default: the running writ's, else v0.0.0).
	WritVersion string
	// Replace, when set, adds `replace github.com/writ-dev/writ => Replace`
	// to go.mod (build against a writ source tree).
	Replace string
}

var (
	nameRE   = regexp.MustCompile(`^[a-z][a-z0-9]{0,30}$`)
	moduleRE = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9._~-]*(/[a-zA-Z0-9._~-]+)*$`)
)

// data is what the templates see.
type data struct {
	Name, GenPkg, Module, GoVersion, WritVersion, Replace string
}

// Write creates the project and returns the files it wrote, relative to
// Dir. Nothing is written when an option is invalid or Dir is not empty.
func Write(o Options) ([]string, error) {
	if o.Dir == "" {
		return nil, errors.New("scaffold: no directory given (fix: writ init DIR)")
	}
	if ents, err := os.ReadDir(o.Dir); err == nil && len(ents) > 0 {
		return nil, fmt.Errorf("scaffold: %s is not empty (%d entries); writ init writes only into a new or empty directory (fix: choose another DIR)", o.Dir, len(ents))
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("scaffold: %w", err)
	}
	if o.Name == "" {
		o.Name = nameFromDir(o.Dir)
	}
	if !nameRE.MatchString(o.Name) {
		return nil, fmt.Errorf("scaffold: --name %q is not a valid project name: it must be a lower-case letter then up to 30 lower-case letters or digits (fix: --name myplane)", o.Name)
	}
	if o.Module == "" {
		o.Module = "example.com/" + o.Name
	}
	if !moduleRE.MatchString(o.Module) || strings.Contains(o.Module, "..") {
		return nil, fmt.Errorf("scaffold: --module %q is not a Go module path (fix: --module example.com/%s)", o.Module, o.Name)
	}
	if o.WritVersion == "" {
		o.WritVersion = runningWritVersion()
	}
	if o.Replace != "" {
		abs, err := filepath.Abs(o.Replace)
		if err != nil {
			return nil, fmt.Errorf("scaffold: --replace %s: %w", o.Replace, err)
		}
		if _, err := os.Stat(filepath.Join(abs, "go.mod")); err != nil {
			return nil, fmt.Errorf("scaffold: --replace %s holds no go.mod (fix: give the root of a writ source tree)", o.Replace)
		}
		o.Replace = filepath.ToSlash(abs)
	}
	d := data{Name: o.Name, GenPkg: o.Name + "gen", Module: o.Module, GoVersion: GoVersion, WritVersion: o.WritVersion, Replace: o.Replace}
	files, err := render(d)
	if err != nil {
		return nil, err
	}
	var wrote []string
	for _, f := range files {
		p := filepath.Join(o.Dir, filepath.FromSlash(f.path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return wrote, fmt.Errorf("scaffold: %w", err)
		}
		if err := os.WriteFile(p, f.body, f.mode); err != nil {
			return wrote, fmt.Errorf("scaffold: %w", err)
		}
		wrote = append(wrote, f.path)
	}
	if o.Replace != "" {
		// The writ tree's go.sum holds the verified sums of every module
		// the project needs through writ.
		sum, err := os.ReadFile(filepath.Join(filepath.FromSlash(o.Replace), "go.sum"))
		if err != nil {
			return wrote, fmt.Errorf("scaffold: --replace %s: %w", o.Replace, err)
		}
		if err := os.WriteFile(filepath.Join(o.Dir, "go.sum"), sum, 0o644); err != nil {
			return wrote, fmt.Errorf("scaffold: %w", err)
		}
		wrote = append(wrote, "go.sum")
	}
	gens, err := generate(o.Dir, d.GenPkg)
	return append(wrote, gens...), err
}

// file is one rendered project file.
type file struct {
	path string
	body []byte
	mode os.FileMode
}

// render executes every template; a template's output path is its path
// under templates/ without .tmpl, with cmd/plugin named after the plugin
// and gitignore as .gitignore.
func render(d data) ([]file, error) {
	var out []file
	err := fs.WalkDir(templates, "templates", func(p string, de fs.DirEntry, err error) error {
		if err != nil || de.IsDir() {
			return err
		}
		src, err := templates.ReadFile(p)
		if err != nil {
			return err
		}
		t, err := template.New(p).Delims("[[", "]]").Option("missingkey=error").Parse(string(src))
		if err != nil {
			return fmt.Errorf("scaffold: template %s: %w", p, err)
		}
		var b bytes.Buffer
		if err := t.Execute(&b, d); err != nil {
			return fmt.Errorf("scaffold: template %s: %w", p, err)
		}
		rel := strings.TrimSuffix(strings.TrimPrefix(p, "templates/"), ".tmpl")
		rel = strings.Replace(rel, "cmd/plugin/", "cmd/writ-"+d.Name+"/", 1)
		if rel == "gitignore" {
			rel = ".gitignore"
		}
		body := b.Bytes()
		if path.Ext(rel) == ".go" {
			if body, err = format.Source(body); err != nil {
				return fmt.Errorf("scaffold: template %s does not render to valid Go: %w", p, err)
			}
		}
		mode := os.FileMode(0o644)
		if path.Ext(rel) == ".sh" {
			mode = 0o755
		}
		out = append(out, file{path: rel, body: body, mode: mode})
		return nil
	})
	return out, err
}

// generate runs writ's generator over the written schema, as `make gen`
// does, into <dir>/<pkg>.
func generate(dir, pkg string) ([]string, error) {
	// Load under the name `writ gen --schema schema` uses from the project
	// directory, so positions in the generated code match a later make gen.
	res, err := load.FS(os.DirFS(filepath.Join(dir, "schema")), ".", "schema")
	if err != nil {
		return nil, fmt.Errorf("scaffold: the scaffolded schema does not load: %w", err)
	}
	if res.Failed() {
		return nil, fmt.Errorf("scaffold: the scaffolded schema has failing findings: %v", res.Findings)
	}
	files, err := gen.Generate(res.Schema, gen.Options{Package: pkg, Source: "schema"})
	if err != nil {
		return nil, fmt.Errorf("scaffold: %w", err)
	}
	if err := gen.Write(filepath.Join(dir, pkg), files); err != nil {
		return nil, fmt.Errorf("scaffold: %w", err)
	}
	var names []string
	for n := range files {
		names = append(names, pkg+"/"+n)
	}
	slices.Sort(names)
	return names, nil
}

// nameFromDir keeps the lower-cased letters and digits of dir's base name.
func nameFromDir(dir string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(filepath.Base(filepath.Clean(dir))) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9' && b.Len() > 0) {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// runningWritVersion is the version of the writ module this binary was
// built from, when it was built from a released version.
func runningWritVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v := bi.Main.Version; bi.Main.Path == writModule && strings.HasPrefix(v, "v") {
			return v
		}
		for _, dep := range bi.Deps {
			if dep.Path == writModule && strings.HasPrefix(dep.Version, "v") {
				return dep.Version
			}
		}
	}
	return "v0.0.0"
}
