package conformance

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"

	"github.com/writ-dev/writ/schema/ir"
)

// Generator draws valid entries of any schema from its field constraints,
// with the same drawer the property and cluster tiers use, for suites that
// drive a cluster from outside this package (the robustness suite). Every
// payload it returns passes the schema's own validation (the typed
// catalog's ParseJSON and CUE, the oracle). It is not safe for concurrent
// use.
type Generator struct {
	e   *Env
	d   *drawer
	rng *rand.Rand
}

// Drawn is one drawn entry.
type Drawn struct {
	Type     string
	Class    ir.Class
	Machine  string // "" when the type is bound to no machine
	Instance string // the machine instance the payload addresses
	// ID is the payload's idempotency key ("" if the type declares none).
	ID      string
	Payload []byte
}

// NewGenerator loads the schema in dir (or dir/schema) and seeds a drawer.
func NewGenerator(dir string, seed uint64) (*Generator, error) {
	e := newEnv(Options{SchemaDir: dir, Seed: seed})
	if r, ok := e.needCatalog(); !ok {
		return nil, fmt.Errorf("conformance: generator: %s", r)
	}
	return &Generator{e: e, d: newDrawer(e.Schema, seed, 0x9e3779b97f4a7c15), rng: rand.New(rand.NewPCG(seed, 7))}, nil
}

// Dir is the resolved schema directory (the one a node's --schema takes).
func (g *Generator) Dir() string { return g.e.Dir }

// Catalog is the schema's catalog.
func (g *Generator) Catalog() ir.Catalog { return g.e.Catalog }

// Fingerprint is the schema's fingerprint.
func (g *Generator) Fingerprint() string { return g.e.Schema.Fingerprint() }

// types returns the catalog's types of class c bound to a machine.
func (g *Generator) types(c ir.Class) []*ir.TypeDesc {
	var out []*ir.TypeDesc
	for _, td := range g.e.Catalog.Types() {
		if td.Class == c && td.Machine != nil && td.Entry != nil && td.ParseJSON != nil {
			out = append(out, td)
		}
	}
	return out
}

// sized sets the drawer's size mode for one draw: about one draw in eight
// takes every bounded string and list at its maximum (in runes or bytes).
func (g *Generator) sized() {
	switch g.rng.IntN(16) {
	case 0:
		g.d.maxOut = maxNarrow
	case 1:
		g.d.maxOut = maxWide
	default:
		g.d.maxOut = maxOff
	}
}

// draw draws a valid payload of td addressing inst; initial requires the
// payload's target to be an initial state of the machine.
func (g *Generator) draw(td *ir.TypeDesc, inst string, initial bool, fill func(map[string]any)) (Drawn, bool) {
	return g.drawSized(td, inst, initial, fill, maxOff, false)
}

// drawSized is draw with the size mode fixed to mode when fixed is set
// (else drawn per try by sized).
func (g *Generator) drawSized(td *ir.TypeDesc, inst string, initial bool, fill func(map[string]any), mode maxMode, fixed bool) (Drawn, bool) {
	g.d.pool = []string{inst}
	defer func() { g.d.maxOut = maxOff }()
	for try := 0; try < 40; try++ {
		if fixed {
			g.d.maxOut = mode
		} else {
			g.sized()
		}
		obj := g.d.object(td.Entry.Fields)
		if fill != nil {
			fill(obj)
		}
		data, _ := json.Marshal(obj)
		p, err := td.ParseJSON(data)
		if err != nil || p.InstanceKey() != inst || g.e.Load.CheckPayloadJSON(td.Name, data) != nil {
			continue
		}
		if initial && !td.Machine.IsInitial(p.TargetState()) {
			continue
		}
		return Drawn{Type: td.Name, Class: td.Class, Machine: td.Machine.Name, Instance: inst, ID: p.IdempotencyKey(), Payload: data}, true
	}
	return Drawn{}, false
}

// Creations draws, for every request type that can create an instance,
// a request creating inst.
func (g *Generator) Creations(inst string) []Drawn {
	var out []Drawn
	for _, td := range g.types(ir.ClassRequest) {
		if d, ok := g.draw(td, inst, true, nil); ok {
			out = append(out, d)
		}
	}
	return out
}

// LargestCreations is Creations with every bounded string and list at its
// maximum: in one-byte runes (the most runes), or with wide set in
// multi-byte runes (the most bytes). A workload that creates some instances
// with it sends the largest payloads the schema allows through the whole
// write path (ingress, evaluation, the log, apply) at its start, not by the
// luck of a draw.
func (g *Generator) LargestCreations(inst string, wide bool) []Drawn {
	mode := maxNarrow
	if wide {
		mode = maxWide
	}
	var out []Drawn
	for _, td := range g.types(ir.ClassRequest) {
		if d, ok := g.drawSized(td, inst, true, nil, mode, true); ok {
			out = append(out, d)
		}
	}
	return out
}

// Request draws a request of a random machine-bound type addressing inst
// (any target: the guard may refuse it).
func (g *Generator) Request(inst string) (Drawn, bool) {
	ts := g.types(ir.ClassRequest)
	if len(ts) == 0 {
		return Drawn{}, false
	}
	return g.draw(ts[g.rng.IntN(len(ts))], inst, false, nil)
}

// Fact draws a fact of a random machine-bound type with an idempotency key
// about inst, with id as its ID and order (when the type declares one) as
// its per-instance order.
func (g *Generator) Fact(inst, id string, order uint64) (Drawn, bool) {
	var ts []*ir.TypeDesc
	for _, td := range g.types(ir.ClassFact) {
		if td.Entry.ID != "" {
			ts = append(ts, td)
		}
	}
	if len(ts) == 0 {
		return Drawn{}, false
	}
	td := ts[g.rng.IntN(len(ts))]
	return g.draw(td, inst, false, func(obj map[string]any) {
		obj[td.Entry.ID] = id
		if td.Entry.Order != "" {
			obj[td.Entry.Order] = jsonNumber(fmt.Sprint(order))
		}
	})
}

// Receipt draws a receipt of a random receipt type, with id as its own
// ID (when the type declares one), whose items address inst where their
// fields allow; it returns the receipt and its items in order, each item
// as a drawn entry (type, class, machine, instance, ID) without a payload.
// The receipt's payload passes the schema's validation, items included.
func (g *Generator) Receipt(inst, id string) (Drawn, []Drawn, bool) {
	var ts []*ir.TypeDesc
	for _, td := range g.e.Catalog.Types() {
		if td.Class == ir.ClassReceipt && td.Entry != nil && td.ParseJSON != nil {
			ts = append(ts, td)
		}
	}
	if len(ts) == 0 {
		return Drawn{}, nil, false
	}
	td := ts[g.rng.IntN(len(ts))]
	g.d.pool = []string{inst}
	for try := 0; try < 40; try++ {
		g.sized()
		obj := g.d.object(td.Entry.Fields)
		if td.Entry.ID != "" {
			obj[td.Entry.ID] = id
		}
		data, _ := json.Marshal(obj)
		p, err := td.ParseJSON(data)
		if err != nil || g.e.Load.CheckPayloadJSON(td.Name, data) != nil {
			continue
		}
		var items []Drawn
		for _, it := range p.Items() {
			d := Drawn{Type: it.EntryType(), Instance: it.InstanceKey(), ID: it.IdempotencyKey()}
			if itd, ok := g.e.Catalog.Type(d.Type); ok {
				d.Class = itd.Class
				if itd.Machine != nil {
					d.Machine = itd.Machine.Name
				}
			}
			items = append(items, d)
		}
		return Drawn{Type: td.Name, Class: td.Class, Instance: inst, ID: p.IdempotencyKey(), Payload: data}, items, true
	}
	return Drawn{}, nil, false
}

// Close releases what the generator holds.
func (g *Generator) Close() { g.e.close() }
