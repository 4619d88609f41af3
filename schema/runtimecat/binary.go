package runtimecat

import (
	"github.com/writ-dev/writ/schema/ir"
	"github.com/writ-dev/writ/schema/wire"
)

// The stable binary encoding is package wire's, as in generated code: the
// fields in declaration order, an optional field behind a presence byte, a
// struct as its members, a list as a count and its elements (a receipt's
// items as their fields).

func appendFields(b []byte, fs []*node, vals []value) []byte {
	for i, f := range fs {
		b = appendValue(b, f, &vals[i])
	}
	return b
}

func appendValue(b []byte, n *node, v *value) []byte {
	if n.optional {
		if !v.set {
			return append(b, 0)
		}
		b = append(b, 1)
	}
	switch n.kind {
	case ir.KindString:
		b = wire.AppendString(b, v.s)
	case ir.KindInt:
		b = wire.AppendInt(b, v.int())
	case ir.KindUint:
		b = wire.AppendUint(b, v.n)
	case ir.KindFloat, ir.KindNumber:
		b = wire.AppendFloatBits(b, v.n)
	case ir.KindBool:
		b = wire.AppendBool(b, v.n != 0)
	case ir.KindStruct:
		b = appendFields(b, n.fields, v.list)
	case ir.KindList:
		b = wire.AppendUint(b, uint64(len(v.list)))
		for i := range v.list {
			if n.item != nil {
				b = appendFields(b, n.item.fields, v.list[i].list)
			} else {
				b = appendValue(b, n.elem, &v.list[i])
			}
		}
	}
	return b
}

func readFields(d *wire.Decoder, fs []*node, vals []value) {
	for i, f := range fs {
		readValue(d, f, &vals[i])
	}
}

func readValue(d *wire.Decoder, n *node, v *value) {
	if n.optional && !d.Bool(n.binName) {
		return
	}
	v.set = true
	switch n.kind {
	case ir.KindString:
		v.s = d.Str(n.binName)
	case ir.KindInt:
		v.n = uint64(d.Int(n.binName))
	case ir.KindUint:
		v.n = d.Uint(n.binName)
	case ir.KindFloat, ir.KindNumber:
		v.n = d.FloatBits(n.binName)
	case ir.KindBool:
		if d.Bool(n.binName) {
			v.n = 1
		}
	case ir.KindStruct:
		v.list = make([]value, len(n.fields))
		readFields(d, n.fields, v.list)
	case ir.KindList:
		v.list = make([]value, d.Count(n.binName))
		for i := range v.list {
			el := &v.list[i]
			if n.item != nil {
				el.set = true
				el.list = make([]value, len(n.item.fields))
				readFields(d, n.item.fields, el.list)
			} else {
				readValue(d, n.elem, el)
			}
		}
	}
}
