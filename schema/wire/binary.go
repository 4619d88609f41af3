package wire

import (
	"encoding/binary"
	"fmt"
	"math"
	"unicode/utf8"

	"github.com/writ-dev/writ/schema/ir"
)

// AppendString appends s as its uvarint byte length and its bytes.
func AppendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// AppendInt appends v as a zig-zag varint.
func AppendInt(b []byte, v int64) []byte { return binary.AppendVarint(b, v) }

// AppendUint appends v (or a list's count) as a uvarint.
func AppendUint(b []byte, v uint64) []byte { return binary.AppendUvarint(b, v) }

// AppendFloat appends the IEEE 754 bits of v, little-endian.
func AppendFloat(b []byte, v float64) []byte { return AppendFloatBits(b, math.Float64bits(v)) }

// AppendFloatBits appends bits, the IEEE 754 bits of a float, little-endian.
func AppendFloatBits(b []byte, bits uint64) []byte {
	return binary.LittleEndian.AppendUint64(b, bits)
}

// AppendBool appends v as one byte, 1 or 0; an optional field's presence
// byte is the bool "present".
func AppendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}

// binaryFix ends every binary decoding error.
const binaryFix = " (fix: re-encode the entry with the current schema)"

// Decoder reads the binary encoding. The first error sticks: later reads
// return zero values and Finish reports it, so decoding code needs no error
// checks. Each read names the field it reads, for the error.
type Decoder struct {
	b   []byte
	typ string
	err *ir.FieldError
}

// NewDecoder returns a Decoder of data, a payload of entry type typ (which
// its errors carry; "" to stamp the type later).
func NewDecoder(typ string, data []byte) Decoder {
	return Decoder{b: data, typ: typ}
}

func (d *Decoder) fail(field, msg string) {
	if d.err == nil {
		d.err = &ir.FieldError{Type: d.typ, Field: field, Rule: "binary encoding", Msg: msg + binaryFix}
	}
	d.b = nil
}

// Uint reads a uvarint.
func (d *Decoder) Uint(field string) uint64 {
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

// Int reads a zig-zag varint.
func (d *Decoder) Int(field string) int64 {
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

// Str reads a string, which must be valid UTF-8.
func (d *Decoder) Str(field string) string {
	n := d.Uint(field)
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

// Float reads a float.
func (d *Decoder) Float(field string) float64 { return math.Float64frombits(d.FloatBits(field)) }

// FloatBits reads a float's IEEE 754 bits.
func (d *Decoder) FloatBits(field string) uint64 {
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

// Bool reads a bool or an optional field's presence byte: 0 or 1, any
// other byte is malformed.
func (d *Decoder) Bool(field string) bool {
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

// Count reads a list's length. Every element takes at least one byte, so a
// length beyond the remaining bytes is malformed (and never allocated).
func (d *Decoder) Count(field string) int {
	n := d.Uint(field)
	if d.err != nil {
		return 0
	}
	if n > uint64(len(d.b)) {
		d.fail(field, "list length exceeds the remaining bytes")
		return 0
	}
	return int(n)
}

// Finish returns the first error, or an error if bytes remain after the
// payload; nil when the payload was read exactly.
func (d *Decoder) Finish() *ir.FieldError {
	if d.err == nil && len(d.b) != 0 {
		d.err = &ir.FieldError{Type: d.typ, Field: "", Rule: "binary encoding", Msg: fmt.Sprintf("%d trailing bytes after the payload", len(d.b)) + binaryFix}
	}
	return d.err
}
