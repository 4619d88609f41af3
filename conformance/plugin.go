package conformance

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/writ-dev/writ/pipeline"
	"github.com/writ-dev/writ/plugins/host"
	"github.com/writ-dev/writ/schema/ir"
)

// pluginHandle is the user's plugins started through plugins/host, exactly
// as a node starts them: one host over every plugin given, each type served
// by exactly one of them.
type pluginHandle struct {
	host  *host.Host
	types []string
	// served maps each served type to the path of the plugin serving it.
	served map[string]string
	eval   pipeline.Evaluator
}

// pluginPaths are every plugin under test: Options.PluginPath, then
// ClusterOptions.Plugins, in order.
func (o *Options) pluginPaths() []string {
	var out []string
	for _, p := range append([]string{o.PluginPath}, o.Cluster.Plugins...) {
		if p != "" {
			out = append(out, p)
		}
	}
	return out
}

func (p *pluginHandle) close() {
	if p.host != nil {
		p.host.Close()
	}
}

// catalogForHost is the catalog the plugin is checked against: the
// generated one when linked, else the loaded model itself.
func (e *Env) catalogForHost() ir.Catalog {
	if e.Catalog != nil {
		return e.Catalog
	}
	return schemaCatalog{e.Schema}
}

// startPlugin starts every plugin under test once per run, in one host as
// a node does (so a type no plugin serves, or two plugins serving one type,
// refuses the start); later calls return the same handle or error.
func (e *Env) startPlugin() (*pluginHandle, error) {
	e.pluginO.Do(func() {
		var cfgs []host.PluginConfig
		for _, path := range e.Opts.pluginPaths() {
			b, err := os.ReadFile(path)
			if err != nil {
				e.plugErr = fmt.Errorf("conformance: plugin %s: %w", path, err)
				return
			}
			sum := sha256.Sum256(b)
			cfgs = append(cfgs, host.PluginConfig{Path: path, SHA256: hex.EncodeToString(sum[:])})
		}
		h, err := host.New(host.Config{
			Plugins:      cfgs,
			Catalog:      e.catalogForHost(),
			StartTimeout: 30 * time.Second,
			CallTimeout:  30 * time.Second,
			LogOutput:    io.Discard,
		})
		if err != nil {
			e.plugErr = err
			return
		}
		p := &pluginHandle{host: h, eval: h, served: map[string]string{}}
		for _, st := range h.Status() {
			p.types = append(p.types, st.Types...)
			for _, t := range st.Types {
				p.served[t] = st.Path
			}
		}
		sort.Strings(p.types)
		e.plugin = p
		if e.Opts.doubles.evaluator != nil {
			p.eval = e.Opts.doubles.evaluator(h)
		}
	})
	return e.plugin, e.plugErr
}

func checkPluginTypes(_ context.Context, e *Env) Outcome {
	if r, ok := e.needSchema(); !ok {
		return notRun("%s", r)
	}
	paths := e.Opts.pluginPaths()
	if len(paths) == 0 {
		return notRun("no plugin given (--plugin PATH)")
	}
	p, err := e.startPlugin()
	if err != nil {
		return Outcome{Cases: 1, Findings: []Finding{pluginRefusal(strings.Join(paths, ","), err)}}
	}
	out := Outcome{Cases: 1}
	need := map[string]bool{}
	for _, en := range e.Schema.Entries {
		if en.Class == ir.ClassRequest || en.Class == ir.ClassFact {
			need[en.Name] = true
		}
	}
	served := map[string]bool{}
	for _, t := range p.types {
		served[t] = true
		if !need[t] {
			out.Findings = append(out.Findings, Finding{Code: CodePluginExtraType, Status: ir.StatusBlocked, Subject: t,
				Message: fmt.Sprintf("the plugin serves %q, which is not evaluated by handlers (only request and fact types are)", t),
				Fix:     "remove the type from the plugin's served types"})
		}
	}
	for _, t := range sortedKeys(need) {
		if !served[t] {
			out.Findings = append(out.Findings, Finding{Code: CodePluginMissingType, Status: ir.StatusBlocked, Subject: t,
				Message: fmt.Sprintf("no plugin serves %q", t), Fix: "add a handler for the type to a plugin, or pass the plugin that serves it with another --plugin"})
		}
	}
	return out
}

// pluginRefusal turns a plugins/host refusal into a finding.
func pluginRefusal(path string, err error) Finding {
	msg := err.Error()
	f := Finding{Code: CodePluginRefused, Status: ir.StatusBlocked, Subject: path, Message: msg,
		Fix: "build the plugin with plugins/sdk against this schema and pass its path with --plugin"}
	switch {
	case strings.Contains(msg, "schema fingerprint"):
		f.Code, f.Fix = CodePluginFingerprint, "rebuild the plugin against this schema's generated code"
	case strings.Contains(msg, "no loaded plugin serves"):
		f.Code, f.Fix = CodePluginMissingType, "add a handler for every request and fact type, or pass every plugin of the schema (--plugin PATH, repeated)"
	case strings.Contains(msg, "does not declare") || strings.Contains(msg, "serves receipt type"):
		f.Code, f.Fix = CodePluginExtraType, "serve only the schema's request and fact types"
	}
	return f
}

// schemaCatalog adapts a loaded model to ir.Catalog for the plugin
// handshake when no generated catalog is linked. It has no payload codecs.
type schemaCatalog struct{ s *ir.Schema }

var _ ir.Catalog = schemaCatalog{}

func (c schemaCatalog) Fingerprint() string { return c.s.Fingerprint() }
func (c schemaCatalog) Schema() *ir.Schema  { return c.s }

func (c schemaCatalog) desc(en *ir.Entry) *ir.TypeDesc {
	td := &ir.TypeDesc{Name: en.Name, Number: en.Number, Class: en.Class, Entry: en}
	if m, ok := c.s.Machine(en.Machine); ok {
		td.Machine = m
	}
	return td
}

func (c schemaCatalog) Type(name string) (*ir.TypeDesc, bool) {
	if en, ok := c.s.Entry(name); ok {
		return c.desc(en), true
	}
	return nil, false
}

func (c schemaCatalog) TypeByNumber(n uint32) (*ir.TypeDesc, bool) {
	for _, en := range c.s.Entries {
		if en.Number == n {
			return c.desc(en), true
		}
	}
	return nil, false
}

func (c schemaCatalog) Types() []*ir.TypeDesc {
	out := make([]*ir.TypeDesc, len(c.s.Entries))
	for i, en := range c.s.Entries {
		out[i] = c.desc(en)
	}
	return out
}

func (c schemaCatalog) Machine(name string) (*ir.Machine, bool) { return c.s.Machine(name) }
