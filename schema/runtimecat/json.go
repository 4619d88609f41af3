package runtimecat

import (
	"math"

	"github.com/writ-dev/writ/schema/ir"
	"github.com/writ-dev/writ/schema/wire"
)

// The JSON reader below walks the compiled nodes with package wire's
// readers, as generated code walks its structs: the same order of checks
// and the same error for every kind of bad input. Error paths are relative
// to the object being read and placed by the caller (wire.Under).

// decodeObject reads a JSON object whose members are fs into vals. data is
// an object inside a document wire.Document accepted.
func decodeObject(fs []*node, known string, data []byte, vals []value) *ir.FieldError {
	m := wire.MembersOf(data)
	for m.Next() {
		key := m.Key()
		fi := -1
		for j, f := range fs {
			if f.name == string(key) {
				fi = j
				break
			}
		}
		if fi < 0 {
			return wire.UnknownField(string(key), known)
		}
		if vals[fi].set {
			return wire.DuplicateField(string(key))
		}
		vals[fi].set = true
		if fe := decodeValue(fs[fi], m.Value(), &vals[fi]); fe != nil {
			return wire.Under(wire.Member(fs[fi].name), fe)
		}
	}
	if fe := m.Err(); fe != nil {
		return fe
	}
	for j, f := range fs {
		if !f.optional && !vals[j].set {
			return wire.MissingField(f.name)
		}
	}
	return nil
}

// decodeValue reads one JSON value of node n into v (v.set is the
// caller's business). Errors name the value itself as "".
func decodeValue(n *node, val []byte, v *value) *ir.FieldError {
	switch n.kind {
	case ir.KindString:
		s, fe := wire.String(val)
		v.s = s
		return fe
	case ir.KindInt:
		x, fe := wire.Int(val)
		v.n = uint64(x)
		return fe
	case ir.KindUint:
		x, fe := wire.Uint(val)
		v.n = x
		return fe
	case ir.KindFloat, ir.KindNumber:
		x, fe := wire.Float(val, n.kind == ir.KindFloat)
		v.n = math.Float64bits(x)
		return fe
	case ir.KindBool:
		x, fe := wire.Bool(val)
		if x {
			v.n = 1
		}
		return fe
	case ir.KindStruct:
		if fe := wire.Object(val); fe != nil {
			return fe
		}
		v.list = make([]value, len(n.fields))
		return decodeObject(n.fields, n.known, val, v.list)
	case ir.KindList:
		return decodeList(n, val, v)
	}
	return fieldErr("", "type", "has no declared type (fix: correct the schema)")
}

func decodeList(n *node, val []byte, v *value) *ir.FieldError {
	elems, fe := wire.List(val)
	if fe != nil {
		return fe
	}
	v.list = make([]value, len(elems))
	for k, ev := range elems {
		el := &v.list[k]
		el.set = true
		if n.item == nil {
			fe = decodeValue(n.elem, ev, el)
		} else if fe = wire.Object(ev); fe == nil {
			el.list = make([]value, len(n.item.fields))
			fe = decodeObject(n.item.fields, n.item.known, ev, el.list)
		}
		if fe != nil {
			return wire.Under(wire.Index(k), fe)
		}
	}
	return nil
}
