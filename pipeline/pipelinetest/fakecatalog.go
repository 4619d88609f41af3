package pipelinetest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/writ-dev/writ/schema/ir"
)

// fakeType is one entry type of the fake catalog.
type fakeType struct {
	entry    *ir.Entry
	machine  *ir.Machine
	toState  string            // fixed target state
	toMap    map[string]string // To field value → state
	enums    map[string][]string
	desc     *ir.TypeDesc
	required []string
	fields   map[string]bool
	cat      *fakeCatalog
}

type fakeCatalog struct {
	schema   *ir.Schema
	types    []*fakeType
	byName   map[string]*fakeType
	machines map[string]*ir.Machine
}

var _ ir.Catalog = (*fakeCatalog)(nil)

// FakeCatalog returns a small hand-written catalog modelled on the jobs
// domain: machine job; job.submit (request, creates PENDING), job.control
// (request, action → state), job.state_report (fact, to=state, order=seq,
// id=report_id), job.dispatch (receipt of job.assign requests),
// cluster.config (config) and job.legacy (declared but unclassified, for W6).
func FakeCatalog() ir.Catalog {
	job := &ir.Machine{Name: "job", Key: "job_id",
		States:   []string{"PENDING", "HELD", "DISPATCHED", "RUNNING", "COMPLETED", "FAILED", "CANCELLED"},
		Initial:  []string{"PENDING"},
		Terminal: []string{"COMPLETED", "FAILED", "CANCELLED"},
		Transitions: map[string][]string{
			"PENDING":    {"DISPATCHED", "HELD", "CANCELLED"},
			"HELD":       {"PENDING", "CANCELLED"},
			"DISPATCHED": {"RUNNING", "COMPLETED", "FAILED", "PENDING", "CANCELLED"},
			"RUNNING":    {"COMPLETED", "FAILED", "PENDING", "CANCELLED"},
		}}
	c := &fakeCatalog{byName: map[string]*fakeType{}, machines: map[string]*ir.Machine{"job": job}}
	add := func(t *fakeType) {
		t.cat = c
		t.fields = map[string]bool{}
		for _, f := range t.entry.Fields {
			t.fields[f.Name] = true
			if !f.Optional {
				t.required = append(t.required, f.Name)
			}
		}
		if t.entry.Machine != "" {
			t.machine = c.machines[t.entry.Machine]
		}
		t.desc = &ir.TypeDesc{Name: t.entry.Name, Number: t.entry.Number, Class: t.entry.Class, Machine: t.machine, Entry: t.entry,
			ParseJSON: t.parseJSON, ParseBinary: t.parseJSON}
		c.types = append(c.types, t)
		c.byName[t.entry.Name] = t
	}
	fields := func(names ...string) []*ir.Field {
		var out []*ir.Field
		for _, n := range names {
			opt := strings.HasSuffix(n, "?")
			out = append(out, &ir.Field{Name: strings.TrimSuffix(n, "?"), Optional: opt})
		}
		return out
	}
	add(&fakeType{entry: &ir.Entry{Name: "job.submit", Number: 1, Class: ir.ClassRequest, Machine: "job",
		Keys: []string{"job/{job_id}", "queue/{queue}"}, Fields: fields("job_id", "queue", "command?")}, toState: "PENDING"})
	add(&fakeType{entry: &ir.Entry{Name: "job.control", Number: 2, Class: ir.ClassRequest, Machine: "job", To: "action",
		Keys: []string{"job/{job_id}"}, Fields: fields("job_id", "action")},
		toMap: map[string]string{"cancel": "CANCELLED", "hold": "HELD", "release": "PENDING"},
		enums: map[string][]string{"action": {"cancel", "hold", "release"}}})
	add(&fakeType{entry: &ir.Entry{Name: "job.state_report", Number: 7, Class: ir.ClassFact, Machine: "job", To: "state", Order: "seq", ID: "report_id",
		Keys: []string{"job/{job_id}"}, Fields: fields("report_id", "job_id", "state", "seq")},
		enums: map[string][]string{"state": {"RUNNING", "COMPLETED", "FAILED"}}})
	add(&fakeType{entry: &ir.Entry{Name: "job.dispatch", Number: 11, Class: ir.ClassReceipt, ID: "dispatch_id", Item: "job.assign", ItemsField: "items",
		Fields: fields("dispatch_id", "items")}})
	add(&fakeType{entry: &ir.Entry{Name: "job.assign", Number: 12, Class: ir.ClassRequest, Machine: "job",
		Keys: []string{"job/{job_id}", "worker/{worker_id}"}, Fields: fields("job_id", "worker_id")}, toState: "DISPATCHED"})
	add(&fakeType{entry: &ir.Entry{Name: "cluster.config", Number: 13, Class: ir.ClassConfig, ID: "version",
		Fields: fields("version", "settings")}})
	add(&fakeType{entry: &ir.Entry{Name: "job.legacy", Number: 14, Class: ir.ClassUnknown, ID: "report_id",
		Fields: fields("report_id", "note?")}})
	c.schema = &ir.Schema{Package: "fake", Machines: []*ir.Machine{job}}
	for _, t := range c.types {
		c.schema.Entries = append(c.schema.Entries, t.entry)
	}
	return c
}

func (c *fakeCatalog) Fingerprint() string { return "fake-jobs-1" }
func (c *fakeCatalog) Schema() *ir.Schema  { return c.schema }
func (c *fakeCatalog) Type(name string) (*ir.TypeDesc, bool) {
	t, ok := c.byName[name]
	if !ok {
		return nil, false
	}
	return t.desc, true
}
func (c *fakeCatalog) TypeByNumber(n uint32) (*ir.TypeDesc, bool) {
	for _, t := range c.types {
		if t.entry.Number == n {
			return t.desc, true
		}
	}
	return nil, false
}
func (c *fakeCatalog) Types() []*ir.TypeDesc {
	out := make([]*ir.TypeDesc, 0, len(c.types))
	for _, t := range c.types {
		out = append(out, t.desc)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Number < out[j].Number })
	return out
}
func (c *fakeCatalog) Machine(name string) (*ir.Machine, bool) {
	m, ok := c.machines[name]
	return m, ok
}

// fakePayload is a dynamically typed payload.
type fakePayload struct {
	t *fakeType
	v map[string]any
}

var _ ir.Payload = (*fakePayload)(nil)

func (t *fakeType) parseJSON(b []byte) (ir.Payload, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v map[string]any
	if err := dec.Decode(&v); err != nil {
		return nil, &ir.FieldError{Type: t.entry.Name, Field: "(payload)", Rule: "json object", Msg: "payload is not a JSON object: " + err.Error()}
	}
	return t.fromMap(v)
}

func (t *fakeType) fromMap(v map[string]any) (ir.Payload, error) {
	p := &fakePayload{t: t, v: v}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *fakePayload) EntryType() string { return p.t.entry.Name }

func (p *fakePayload) Validate() error {
	name := p.t.entry.Name
	keys := make([]string, 0, len(p.v))
	for k := range p.v {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !p.t.fields[k] {
			return &ir.FieldError{Type: name, Field: k, Rule: "declared", Msg: "unknown field; remove it"}
		}
	}
	for _, r := range p.t.required {
		if _, ok := p.v[r]; !ok {
			return &ir.FieldError{Type: name, Field: r, Rule: "required", Msg: "missing required field"}
		}
	}
	for f, allowed := range p.t.enums {
		s, _ := p.v[f].(string)
		ok := false
		for _, a := range allowed {
			ok = ok || a == s
		}
		if !ok {
			return &ir.FieldError{Type: name, Field: f, Rule: strings.Join(allowed, "|"), Msg: fmt.Sprintf("%q is not allowed", s)}
		}
	}
	if p.t.entry.Order != "" {
		if _, ok := p.Order(); !ok {
			return &ir.FieldError{Type: name, Field: p.t.entry.Order, Rule: "uint64", Msg: "must be a non-negative integer"}
		}
	}
	if p.t.entry.ItemsField != "" {
		items, ok := p.v[p.t.entry.ItemsField].([]any)
		if !ok || len(items) == 0 {
			return &ir.FieldError{Type: name, Field: p.t.entry.ItemsField, Rule: "list.MinItems(1)", Msg: "at least one item is required"}
		}
		it := p.t.cat.byName[p.t.entry.Item]
		for i, x := range items {
			m, ok := x.(map[string]any)
			if !ok {
				return &ir.FieldError{Type: name, Field: fmt.Sprintf("%s[%d]", p.t.entry.ItemsField, i), Rule: "object", Msg: "item must be an object"}
			}
			if _, err := it.fromMap(m); err != nil {
				return err
			}
		}
	}
	return nil
}

func (p *fakePayload) MarshalJSON() ([]byte, error) { return json.Marshal(p.v) }

func (p *fakePayload) AppendBinary(b []byte) ([]byte, error) {
	j, err := json.Marshal(p.v)
	return append(b, j...), err
}

func (p *fakePayload) str(f string) string {
	switch x := p.v[f].(type) {
	case string:
		return x
	case json.Number:
		return x.String()
	}
	return ""
}

func (p *fakePayload) Keys() []string {
	out := make([]string, 0, len(p.t.entry.Keys))
	for _, tpl := range p.t.entry.Keys {
		k := tpl
		for f := range p.t.fields {
			k = strings.ReplaceAll(k, "{"+f+"}", p.str(f))
		}
		out = append(out, k)
	}
	return out
}

func (p *fakePayload) InstanceKey() string {
	if p.t.machine == nil {
		return ""
	}
	return p.str(p.t.machine.Key)
}

func (p *fakePayload) TargetState() string {
	switch {
	case p.t.toState != "":
		return p.t.toState
	case p.t.toMap != nil:
		return p.t.toMap[p.str(p.t.entry.To)]
	case p.t.entry.To != "":
		return p.str(p.t.entry.To)
	}
	return ""
}

func (p *fakePayload) Order() (uint64, bool) {
	if p.t.entry.Order == "" {
		return 0, false
	}
	n, err := strconv.ParseUint(p.str(p.t.entry.Order), 10, 64)
	return n, err == nil
}

func (p *fakePayload) IdempotencyKey() string {
	if p.t.entry.ID == "" {
		return ""
	}
	return p.str(p.t.entry.ID)
}

func (p *fakePayload) Items() []ir.Payload {
	if p.t.entry.ItemsField == "" {
		return nil
	}
	items, _ := p.v[p.t.entry.ItemsField].([]any)
	it := p.t.cat.byName[p.t.entry.Item]
	out := make([]ir.Payload, 0, len(items))
	for _, x := range items {
		m, _ := x.(map[string]any)
		out = append(out, &fakePayload{t: it, v: m})
	}
	return out
}
