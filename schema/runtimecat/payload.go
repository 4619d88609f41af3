package runtimecat

import (
	"strconv"

	"github.com/writ-dev/writ/schema/ir"
)

// payload is a decoded payload of one entry type: its field values in
// declaration order.
type payload struct {
	e    *entry
	vals []value
}

var _ ir.Payload = (*payload)(nil)

// EntryType is the declared entry type name.
func (p *payload) EntryType() string { return p.e.name }

// Validate checks every constraint the schema declares for the payload.
func (p *payload) Validate() error {
	if fe := checkFields(p.e.fields, p.vals); fe != nil {
		return p.e.typed(fe)
	}
	return nil
}

// AppendBinary appends the stable binary encoding of the payload.
func (p *payload) AppendBinary(b []byte) ([]byte, error) {
	return appendFields(b, p.e.fields, p.vals), nil
}

// Keys renders the schema's key templates.
func (p *payload) Keys() []string {
	out := make([]string, len(p.e.keys))
	for i, segs := range p.e.keys {
		switch {
		case len(segs) == 1 && segs[0].field < 0:
			out[i] = segs[0].lit
		case len(segs) == 1:
			out[i] = p.render(segs[0])
		default:
			var b []byte
			for _, sg := range segs {
				if sg.field < 0 {
					b = append(b, sg.lit...)
					continue
				}
				b = p.appendSeg(b, sg)
			}
			out[i] = string(b)
		}
	}
	return out
}

func (p *payload) render(sg keySeg) string {
	v := &p.vals[sg.field]
	switch sg.kind {
	case ir.KindInt:
		return strconv.FormatInt(v.int(), 10)
	case ir.KindUint:
		return strconv.FormatUint(v.n, 10)
	}
	return v.s
}

func (p *payload) appendSeg(b []byte, sg keySeg) []byte {
	v := &p.vals[sg.field]
	switch sg.kind {
	case ir.KindInt:
		return strconv.AppendInt(b, v.int(), 10)
	case ir.KindUint:
		return strconv.AppendUint(b, v.n, 10)
	}
	return append(b, v.s...)
}

// InstanceKey is the value of the machine's key field ("" if none).
func (p *payload) InstanceKey() string {
	if p.e.instance < 0 {
		return ""
	}
	return p.vals[p.e.instance].s
}

// TargetState is the state the entry moves its instance to ("" for none).
func (p *payload) TargetState() string {
	switch {
	case p.e.toState != "":
		return p.e.toState
	case p.e.toMap != nil:
		return p.e.toMap[p.vals[p.e.to].s]
	case p.e.to >= 0:
		return p.vals[p.e.to].s
	}
	return ""
}

// Order is the per-instance order of the payload (ok=false for none).
func (p *payload) Order() (uint64, bool) {
	if p.e.order < 0 {
		return 0, false
	}
	v := &p.vals[p.e.order]
	if p.e.fields[p.e.order].optional && !v.set {
		return 0, false
	}
	if p.e.fields[p.e.order].kind == ir.KindInt && v.int() < 0 {
		return 0, false
	}
	return v.n, true
}

// IdempotencyKey is the value of the payload's id field ("" for none).
func (p *payload) IdempotencyKey() string {
	if p.e.id < 0 {
		return ""
	}
	return p.vals[p.e.id].s
}

// Items returns the carried items (nil unless the type is a receipt).
func (p *payload) Items() []ir.Payload {
	if p.e.items < 0 {
		return nil
	}
	its := p.vals[p.e.items].list
	item := p.e.fields[p.e.items].item
	ps := make([]payload, len(its))
	out := make([]ir.Payload, len(its))
	for i := range its {
		ps[i] = payload{e: item, vals: its[i].list}
		out[i] = &ps[i]
	}
	return out
}
