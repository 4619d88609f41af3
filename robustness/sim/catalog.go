package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/writ-dev/writ/kv"
	"github.com/writ-dev/writ/pipeline"
	"github.com/writ-dev/writ/schema/ir"
)

// The simulation's schema: one request type, sim.put {key, value}, bound to
// no machine, whose handler writes value to k/<key> with a CAS on the key's
// revision. It is the smallest schema that exercises the pipeline's request
// path (validate, evaluate under latches, CAS conflicts and
// re-evaluation, propose, barrier, dedup by ID, fences) without any
// domain's rules.

// PutType is the simulation's only entry type.
const PutType = "sim.put"

// KeyPrefix prefixes every key the handler writes.
const KeyPrefix = "k/"

type putPayload struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

func (p *putPayload) EntryType() string { return PutType }
func (p *putPayload) Validate() error {
	if p.Key == "" {
		return &ir.FieldError{Type: PutType, Field: "key", Rule: "required", Msg: "missing required field"}
	}
	return nil
}
func (p *putPayload) AppendBinary(b []byte) ([]byte, error) {
	j, err := json.Marshal(p)
	return append(b, j...), err
}
func (p *putPayload) Keys() []string        { return []string{KeyPrefix + p.Key} }
func (p *putPayload) InstanceKey() string   { return "" }
func (p *putPayload) TargetState() string   { return "" }
func (p *putPayload) Order() (uint64, bool) { return 0, false }
func (p *putPayload) IdempotencyKey() string {
	return ""
}
func (p *putPayload) Items() []ir.Payload { return nil }

func parsePut(b []byte) (ir.Payload, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var p putPayload
	if err := dec.Decode(&p); err != nil {
		return nil, &ir.FieldError{Type: PutType, Field: "(payload)", Rule: "json object", Msg: "payload is not a sim.put object: " + err.Error()}
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return &p, nil
}

type catalog struct {
	schema *ir.Schema
	put    *ir.TypeDesc
}

var _ ir.Catalog = (*catalog)(nil)

func newCatalog() *catalog {
	e := &ir.Entry{Name: PutType, Number: 1, Class: ir.ClassRequest,
		Keys:   []string{KeyPrefix + "{key}"},
		Fields: []*ir.Field{{Name: "key"}, {Name: "value"}}}
	return &catalog{
		schema: &ir.Schema{Package: "sim", Entries: []*ir.Entry{e}},
		put:    &ir.TypeDesc{Name: PutType, Number: 1, Class: ir.ClassRequest, Entry: e, ParseJSON: parsePut, ParseBinary: parsePut},
	}
}

func (c *catalog) Fingerprint() string { return "writ-sim-1" }
func (c *catalog) Schema() *ir.Schema  { return c.schema }
func (c *catalog) Type(name string) (*ir.TypeDesc, bool) {
	if name == PutType {
		return c.put, true
	}
	return nil, false
}
func (c *catalog) TypeByNumber(n uint32) (*ir.TypeDesc, bool) {
	if n == 1 {
		return c.put, true
	}
	return nil, false
}
func (c *catalog) Types() []*ir.TypeDesc              { return []*ir.TypeDesc{c.put} }
func (c *catalog) Machine(string) (*ir.Machine, bool) { return nil, false }

// putHandler evaluates sim.put: the value goes to the key, guarded by the
// revision the handler saw.
type putHandler struct{}

func (putHandler) Evaluate(_ context.Context, items []pipeline.EvalItem) ([]pipeline.EvalResult, error) {
	out := make([]pipeline.EvalResult, len(items))
	for i, it := range items {
		var p putPayload
		if err := json.Unmarshal(it.Payload, &p); err != nil || len(it.State) != 1 {
			out[i].Err = &pipeline.EvalError{Kind: pipeline.EvalValidation, Msg: fmt.Sprintf("sim.put: bad item (%v, %d keys)", err, len(it.State))}
			continue
		}
		st := it.State[0]
		out[i].Effect = kv.Effect{Writes: []kv.Write{{Key: st.Key, Value: []byte(p.Value), IfRev: st.Rev}}}
	}
	return out, nil
}
