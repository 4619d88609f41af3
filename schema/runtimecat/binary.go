package runtimecat

import (
	"encoding/binary"
	"fmt"
	"unicode/utf8"

	"github.com/writ-dev/writ/schema/ir"
)

// The stable binary encoding, identical to the generated one: the fields in
// declaration order; an optional field as a flag byte (0 absent, 1 present)
// followed by the value; strings as a uvarint length and the bytes; ints as
// zig-zag varints, uints as uvarints, floats as 8 little-endian bytes of the
// IEEE 754 bits, bools as one byte; a struct as its members; a list as a
// uvarint count and the elements (a receipt's items as their fields).

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
		b = binary.AppendUvarint(b, uint64(len(v.s)))
		b = append(b, v.s...)
	case ir.KindInt:
		b = binary.AppendVarint(b, v.int())
	case ir.KindUint:
		b = binary.AppendUvarint(b, v.n)
	case ir.KindFloat, ir.KindNumber:
		b = binary.LittleEndian.AppendUint64(b, v.n)
	case ir.KindBool:
		b = append(b, byte(v.n))
	case ir.KindStruct:
		b = appendFields(b, n.fields, v.list)
	case ir.KindList:
		if n.item != nil {
			b = binary.AppendUvarint(b, uint64(len(v.list)))
			for i := range v.list {
				b = appendFields(b, n.item.fields, v.list[i].list)
			}
			break
		}
		b = binary.AppendUvarint(b, uint64(len(v.list)))
		for i := range v.list {
			b = appendValue(b, n.elem, &v.list[i])
		}
	}
	return b
}

// decoder reads the stable binary encoding. The first error sticks; later
// reads return zero values.
type decoder struct {
	b   []byte
	err *ir.FieldError
}

func (d *decoder) fail(field, msg string) {
	if d.err == nil {
		d.err = &ir.FieldError{Field: field, Rule: "binary encoding", Msg: msg + " (fix: re-encode the entry with the current schema)"}
	}
	d.b = nil
}

func (d *decoder) uvarint(field string) uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail(field, "truncated or overlong unsigned varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint(field string) int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail(field, "truncated or overlong varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) str(field string) string {
	n := d.uvarint(field)
	if d.err != nil {
		return ""
	}
	if n > uint64(len(d.b)) {
		d.fail(field, "string length exceeds the remaining bytes")
		return ""
	}
	s := d.b[:n]
	if !utf8.Valid(s) {
		d.fail(field, "string is not valid UTF-8")
		return ""
	}
	d.b = d.b[n:]
	return string(s)
}

func (d *decoder) float(field string) uint64 {
	if d.err != nil {
		return 0
	}
	if len(d.b) < 8 {
		d.fail(field, "truncated float")
		return 0
	}
	v := binary.LittleEndian.Uint64(d.b)
	d.b = d.b[8:]
	return v
}

func (d *decoder) flag(field string) bool {
	if d.err != nil {
		return false
	}
	if len(d.b) == 0 {
		d.fail(field, "truncated")
		return false
	}
	v := d.b[0]
	d.b = d.b[1:]
	switch v {
	case 0:
		return false
	case 1:
		return true
	}
	d.fail(field, "flag byte is neither 0 nor 1")
	return false
}

// count reads a list length; every element takes at least one byte, so a
// length beyond the remaining bytes is malformed (and never allocated).
func (d *decoder) count(field string) int {
	n := d.uvarint(field)
	if d.err != nil {
		return 0
	}
	if n > uint64(len(d.b)) {
		d.fail(field, "list length exceeds the remaining bytes")
		return 0
	}
	return int(n)
}

func (d *decoder) finish() *ir.FieldError {
	if d.err == nil && len(d.b) != 0 {
		d.err = &ir.FieldError{Field: "", Rule: "binary encoding", Msg: fmt.Sprintf("%d trailing bytes after the payload (fix: re-encode the entry with the current schema)", len(d.b))}
	}
	return d.err
}

func (d *decoder) fields(fs []*node, vals []value) {
	for i, f := range fs {
		d.value(f, &vals[i])
	}
}

func (d *decoder) value(n *node, v *value) {
	if n.optional && !d.flag(n.binName) {
		return
	}
	v.set = true
	switch n.kind {
	case ir.KindString:
		v.s = d.str(n.binName)
	case ir.KindInt:
		v.n = uint64(d.varint(n.binName))
	case ir.KindUint:
		v.n = d.uvarint(n.binName)
	case ir.KindFloat, ir.KindNumber:
		v.n = d.float(n.binName)
	case ir.KindBool:
		if d.flag(n.binName) {
			v.n = 1
		}
	case ir.KindStruct:
		v.list = make([]value, len(n.fields))
		d.fields(n.fields, v.list)
	case ir.KindList:
		c := d.count(n.binName)
		if n.item != nil {
			v.list = make([]value, c)
			for i := range v.list {
				it := &v.list[i]
				it.set = true
				it.list = make([]value, len(n.item.fields))
				d.fields(n.item.fields, it.list)
			}
			return
		}
		v.list = make([]value, c)
		for i := range v.list {
			d.value(n.elem, &v.list[i])
		}
	}
}
