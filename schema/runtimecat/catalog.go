package runtimecat

import (
	"fmt"
	"strings"

	"github.com/writ-dev/writ/schema/ir"
	"github.com/writ-dev/writ/schema/wire"
)

// entry is the compiled form of one entry type.
type entry struct {
	name   string
	decl   *ir.Entry
	fields []*node
	known  string

	keys     [][]keySeg
	instance int // index of the machine's key field (-1: none)
	to       int // index of the To field (-1: none)
	toState  string
	toMap    map[string]string // To value → state, only for declared enum values
	order    int               // index of the Order field (-1: none)
	id       int               // index of the ID field (-1: none)
	scope    int               // index of the order_scope field (-1: none)
	items    int               // index of the items field (-1: not a receipt)
}

// keySeg is one piece of a key template: a literal, or the value of field
// index field (field >= 0).
type keySeg struct {
	lit   string
	field int
	kind  ir.Kind
}

type catalog struct {
	s        *ir.Schema
	fp       string
	types    []*ir.TypeDesc
	byName   map[string]*ir.TypeDesc
	byNumber map[uint32]*ir.TypeDesc
	machines map[string]*ir.Machine
}

var _ ir.Catalog = (*catalog)(nil)

// New compiles the schema's payload codecs and validators into a catalog.
// It refuses a schema whose own check (ir.Schema.Check) has failing
// findings, and fails, naming the type and field, on a model that the
// loader would not have produced (an unknown item type, a key template naming an
// undeclared field, a pattern that is not RE2, a bound out of its kind's
// range).
func New(s *ir.Schema) (ir.Catalog, error) {
	if s == nil {
		return nil, fmt.Errorf("runtimecat: no schema (fix: load one with schema/load)")
	}
	if fs := s.Check(); ir.AnyFails(fs) {
		var msgs []string
		for _, f := range fs {
			if f.Fails() {
				msgs = append(msgs, f.String())
			}
		}
		return nil, fmt.Errorf("runtimecat: the schema has BLOCKED/INCOMPLETE findings (fix: correct them; writ vet lists them):\n%s", strings.Join(msgs, "\n"))
	}
	c := &compiler{s: s, entries: map[string]*entry{}, matchers: map[string]func(string) bool{}}
	// Entries first, so that a receipt's items can point at their type
	// before its fields are compiled.
	for _, e := range s.Entries {
		if e == nil {
			return nil, fmt.Errorf("runtimecat: nil entry in the schema (fix: reload the schema)")
		}
		if _, dup := c.entries[e.Name]; dup {
			return nil, fmt.Errorf("runtimecat: entry type %q is declared twice (fix: rename one)", e.Name)
		}
		c.entries[e.Name] = &entry{name: e.Name, decl: e}
	}
	cat := &catalog{
		s:        s,
		fp:       s.Fingerprint(),
		byName:   make(map[string]*ir.TypeDesc, len(s.Entries)),
		byNumber: make(map[uint32]*ir.TypeDesc, len(s.Entries)),
		machines: make(map[string]*ir.Machine, len(s.Machines)),
	}
	for _, m := range s.Machines {
		cat.machines[m.Name] = m
	}
	for _, e := range s.Entries {
		en := c.entries[e.Name]
		fs, err := c.fields(e.Name, e.Fields, "")
		if err != nil {
			return nil, err
		}
		en.fields = fs
		en.known = knownList(fs)
	}
	for _, e := range s.Entries {
		en := c.entries[e.Name]
		if err := en.routing(cat); err != nil {
			return nil, err
		}
		d := &ir.TypeDesc{Name: e.Name, Number: e.Number, Class: e.Class, Entry: e}
		if e.Machine != "" {
			m, ok := cat.machines[e.Machine]
			if !ok {
				return nil, fmt.Errorf("runtimecat: %s: machine %q is not declared (fix: declare it or correct the name)", e.Name, e.Machine)
			}
			d.Machine = m
		}
		d.ParseJSON = en.parseJSON
		d.ParseBinary = en.parseBinary
		if _, dup := cat.byNumber[e.Number]; dup {
			return nil, fmt.Errorf("runtimecat: %s: type number %d is used twice (fix: give each type its own number)", e.Name, e.Number)
		}
		cat.types = append(cat.types, d)
		cat.byName[e.Name] = d
		cat.byNumber[e.Number] = d
	}
	return cat, nil
}

func (en *entry) fieldIndex(name string) int {
	for i, f := range en.fields {
		if f.name == name {
			return i
		}
	}
	return -1
}

// routing resolves the fields the routing accessors read.
func (en *entry) routing(cat *catalog) error {
	e := en.decl
	need := func(what, name string, kinds ...ir.Kind) (int, error) {
		if name == "" {
			return -1, nil
		}
		i := en.fieldIndex(name)
		if i < 0 {
			return -1, fmt.Errorf("runtimecat: %s: %s names undeclared field %q (fix: declare the field or correct the name)", e.Name, what, name)
		}
		for _, k := range kinds {
			if en.fields[i].kind == k {
				return i, nil
			}
		}
		return -1, fmt.Errorf("runtimecat: %s: %s field %q is a %s (fix: make it one of %v)", e.Name, what, name, en.fields[i].kind, kinds)
	}
	var err error
	en.instance = -1
	if m, ok := cat.machines[e.Machine]; ok && e.Machine != "" {
		if en.instance, err = need("the machine key", m.Key, ir.KindString); err != nil {
			return err
		}
	}
	if en.to, err = need("to", e.To, ir.KindString); err != nil {
		return err
	}
	en.toState = e.ToState
	if e.ToMap != nil && en.to >= 0 {
		en.toMap = map[string]string{}
		f, _ := e.Field(e.To)
		for _, v := range f.Enum {
			if st, ok := e.ToMap[v]; ok {
				en.toMap[v] = st
			}
		}
	}
	if en.order, err = need("order", e.Order, ir.KindUint, ir.KindInt); err != nil {
		return err
	}
	if en.id, err = need("id", e.ID, ir.KindString); err != nil {
		return err
	}
	if en.scope, err = need("order_scope", e.OrderScope, ir.KindString, ir.KindUint, ir.KindInt); err != nil {
		return err
	}
	en.items = -1
	if e.Item != "" {
		if en.items, err = need("items", e.ItemsField, ir.KindList); err != nil {
			return err
		}
		if en.items < 0 || en.fields[en.items].item == nil {
			return fmt.Errorf("runtimecat: %s: items field %q does not hold payloads of %q (fix: declare it as a list of the item type)", e.Name, e.ItemsField, e.Item)
		}
	}
	for _, tmpl := range e.Keys {
		var segs []keySeg
		rest := tmpl
		for rest != "" {
			i := strings.IndexByte(rest, '{')
			if i < 0 {
				segs = append(segs, keySeg{lit: rest, field: -1})
				break
			}
			if i > 0 {
				segs = append(segs, keySeg{lit: rest[:i], field: -1})
			}
			j := strings.IndexByte(rest[i:], '}')
			if j < 0 {
				return fmt.Errorf("runtimecat: %s: key template %q has an unclosed {", e.Name, tmpl)
			}
			j += i
			fi, err := need("key template "+tmpl, rest[i+1:j], ir.KindString, ir.KindInt, ir.KindUint)
			if err != nil {
				return err
			}
			segs = append(segs, keySeg{field: fi, kind: en.fields[fi].kind})
			rest = rest[j+1:]
		}
		en.keys = append(en.keys, segs)
	}
	return nil
}

func (c *catalog) Fingerprint() string { return c.fp }

func (c *catalog) Schema() *ir.Schema { return c.s }

func (c *catalog) Type(name string) (*ir.TypeDesc, bool) {
	d, ok := c.byName[name]
	return d, ok
}

func (c *catalog) TypeByNumber(n uint32) (*ir.TypeDesc, bool) {
	d, ok := c.byNumber[n]
	return d, ok
}

// Types lists every declared entry type in type-number order (the schema's
// Entries are sorted by number).
func (c *catalog) Types() []*ir.TypeDesc { return append([]*ir.TypeDesc(nil), c.types...) }

func (c *catalog) Machine(name string) (*ir.Machine, bool) {
	m, ok := c.machines[name]
	return m, ok
}

func (en *entry) parseJSON(data []byte) (ir.Payload, error) {
	if fe := wire.Document(data); fe != nil {
		return nil, en.typed(fe)
	}
	p := en.newPayload()
	if fe := decodeObject(en.fields, en.known, data, p.vals); fe != nil {
		return nil, en.typed(fe)
	}
	if fe := checkFields(en.fields, p.vals); fe != nil {
		return nil, en.typed(fe)
	}
	return p, nil
}

func (en *entry) parseBinary(data []byte) (ir.Payload, error) {
	p := en.newPayload()
	d := wire.NewDecoder("", data)
	readFields(&d, en.fields, p.vals)
	if fe := d.Finish(); fe != nil {
		return nil, en.typed(fe)
	}
	if fe := checkFields(en.fields, p.vals); fe != nil {
		return nil, en.typed(fe)
	}
	return p, nil
}

// newPayload allocates a payload and its values together (one allocation
// instead of two for up to 16 fields).
func (en *entry) newPayload() *payload {
	n := len(en.fields)
	switch {
	case n <= 4:
		return payloadWith(en, n, func(a *[4]value) []value { return a[:n:n] })
	case n <= 6:
		return payloadWith(en, n, func(a *[6]value) []value { return a[:n:n] })
	case n <= 8:
		return payloadWith(en, n, func(a *[8]value) []value { return a[:n:n] })
	case n <= 16:
		return payloadWith(en, n, func(a *[16]value) []value { return a[:n:n] })
	}
	return &payload{e: en, vals: make([]value, n)}
}

// payloadWith allocates a payload together with an array A of values, of
// which vals takes the first n.
func payloadWith[A any](en *entry, n int, vals func(*A) []value) *payload {
	x := &struct {
		payload
		arr A
	}{}
	x.payload = payload{e: en, vals: vals(&x.arr)}
	return &x.payload
}

// typed stamps the entry type on an error built without it and roots its
// path at the payload.
func (en *entry) typed(fe *ir.FieldError) error {
	return wire.Root(en.name, fe)
}
