package gen

import (
	"bytes"
	_ "embed"
)

func (g *generator) codec(b *bytes.Buffer) {
	g.header(b, irPkg, jsonscanPkg, "encoding/binary", "encoding/json", "fmt", "math", "strings", "unicode/utf8")
	b.WriteString(codecSrc)
}

// jsonscanPkg is the JSON syntax check and primitives every generated
// package imports (one copy, tested against encoding/json).
const jsonscanPkg = "github.com/writ-dev/writ/schema/jsonscan"

// codecSrc is emitted verbatim into every generated package: the binary and
// JSON primitives the payload codecs share.
const codecSrc = `
func intp(v int) *int { return &v }

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}

func appendFloat(b []byte, v float64) []byte {
	return binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
}

// decoder reads the stable binary encoding. The first error sticks; later
// reads return zero values, so decoding code needs no error checks.
type decoder struct {
	b   []byte
	typ string
	err error
}

func (d *decoder) fail(field, msg string) {
	if d.err == nil {
		d.err = &ir.FieldError{Type: d.typ, Field: field, Rule: "binary encoding", Msg: msg + " (fix: re-encode the entry with the current schema)"}
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

func (d *decoder) float(field string) float64 {
	if d.err != nil {
		return 0
	}
	if len(d.b) < 8 {
		d.fail(field, "truncated float")
		return 0
	}
	v := math.Float64frombits(binary.LittleEndian.Uint64(d.b))
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

func (d *decoder) finish() error {
	if d.err == nil && len(d.b) != 0 {
		d.err = &ir.FieldError{Type: d.typ, Field: "", Rule: "binary encoding", Msg: fmt.Sprintf("%d trailing bytes after the payload (fix: re-encode the entry with the current schema)", len(d.b))}
	}
	return d.err
}

func quoteTrunc(s string) string {
	if len(s) > 64 {
		return fmt.Sprintf("%q…", s[:64])
	}
	return fmt.Sprintf("%q", s)
}

func fieldErr(typ, field, rule, msg string) *ir.FieldError {
	return &ir.FieldError{Type: typ, Field: field, Rule: rule, Msg: msg}
}

func join(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + "." + name
}

// nest re-roots a nested payload's field error under the outer type.
func nest(typ, path string, err error) error {
	if fe, ok := err.(*ir.FieldError); ok {
		return &ir.FieldError{Type: typ, Field: join(path, fe.Field), Rule: fe.Rule, Msg: fe.Msg}
	}
	return fmt.Errorf("%s: %s: %w", typ, path, err)
}

func index(prefix string, i int) string {
	return fmt.Sprintf("%s[%d]", prefix, i)
}

// eachField calls fn for every member of a JSON object, with exact
// (case-sensitive) key matching. key is only valid during the call.
func eachField(typ, prefix string, data []byte, fn func(key, val []byte) error) error {
	if !jsonscan.Valid(data) {
		return fieldErr(typ, prefix, "json", "is not valid JSON (fix: send a JSON object)")
	}
	i := jsonscan.SkipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return fieldErr(typ, prefix, "json", "must be a JSON object")
	}
	i = jsonscan.SkipSpace(data, i+1)
	if data[i] == '}' {
		return nil
	}
	for {
		end := jsonscan.SkipString(data, i)
		rawKey := data[i:end]
		key := rawKey[1 : len(rawKey)-1]
		if jsonscan.HasEscape(rawKey) {
			var k string
			if err := json.Unmarshal(rawKey, &k); err != nil {
				return fieldErr(typ, prefix, "json", "has a malformed key")
			}
			key = []byte(k)
		}
		i = jsonscan.SkipSpace(data, end)
		i = jsonscan.SkipSpace(data, i+1) // ':'
		vend := jsonscan.SkipValue(data, i)
		if err := fn(key, data[i:vend]); err != nil {
			return err
		}
		i = jsonscan.SkipSpace(data, vend)
		if data[i] == '}' {
			return nil
		}
		i = jsonscan.SkipSpace(data, i+1) // ','
	}
}





func wrongType(typ, prefix, name, want string, val []byte) error {
	return fieldErr(typ, join(prefix, name), want, fmt.Sprintf("must be %s, not %s (fix: send %s)", want, jsonscan.Kind(val), want))
}

func jsonString(typ, prefix, name string, val []byte) (string, error) {
	if val[0] != '"' {
		return "", wrongType(typ, prefix, name, "string", val)
	}
	plain := true // ASCII without escapes: the bytes between the quotes are the string
	for _, c := range val[1 : len(val)-1] {
		if c == '\\' || c >= utf8.RuneSelf {
			plain = false
			break
		}
	}
	if plain {
		return string(val[1 : len(val)-1]), nil
	}
	if !utf8.Valid(val) {
		return "", fieldErr(typ, join(prefix, name), "string", "is not valid UTF-8 (fix: send UTF-8 text)")
	}
	if jsonscan.HasEscape(val) {
		var s string
		if err := json.Unmarshal(val, &s); err != nil {
			return "", wrongType(typ, prefix, name, "string", val)
		}
		return s, nil
	}
	return string(val[1 : len(val)-1]), nil
}

func jsonBool(typ, prefix, name string, val []byte) (bool, error) {
	switch string(val) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, wrongType(typ, prefix, name, "bool", val)
}


func jsonInt(typ, prefix, name string, val []byte) (int64, error) {
	if !jsonscan.IsIntLiteral(val) {
		return 0, wrongType(typ, prefix, name, "integer", val)
	}
	neg := val[0] == '-'
	digits := val
	if neg {
		digits = val[1:]
	}
	var u uint64
	for _, c := range digits {
		if u > (math.MaxUint64-9)/10 {
			return 0, fieldErr(typ, join(prefix, name), "int64", "is out of range (fix: send a smaller integer)")
		}
		u = u*10 + uint64(c-'0')
	}
	if neg {
		if u > 1<<63 {
			return 0, fieldErr(typ, join(prefix, name), "int64", "is out of range (fix: send a larger integer)")
		}
		return -int64(u), nil
	}
	if u > math.MaxInt64 {
		return 0, fieldErr(typ, join(prefix, name), "int64", "is out of range (fix: send a smaller integer)")
	}
	return int64(u), nil
}

func jsonUint(typ, prefix, name string, val []byte) (uint64, error) {
	if !jsonscan.IsIntLiteral(val) {
		return 0, wrongType(typ, prefix, name, "integer", val)
	}
	if val[0] == '-' {
		if string(val) == "-0" {
			return 0, nil
		}
		return 0, fieldErr(typ, join(prefix, name), ">=0", "must be >= 0 (fix: send a non-negative integer)")
	}
	var u uint64
	for _, c := range val {
		d := uint64(c - '0')
		if u > (math.MaxUint64-d)/10 {
			return 0, fieldErr(typ, join(prefix, name), "uint64", "is out of range (fix: send a smaller integer)")
		}
		u = u*10 + d
	}
	return u, nil
}

func jsonFloat(typ, prefix, name string, val []byte, strict bool) (float64, error) {
	if val[0] != '-' && (val[0] < '0' || val[0] > '9') {
		return 0, wrongType(typ, prefix, name, "number", val)
	}
	if strict && jsonscan.IsIntLiteral(val) {
		return 0, fieldErr(typ, join(prefix, name), "float", "must be a float literal with a fraction or exponent (fix: send e.g. 1.0)")
	}
	var f float64
	if err := json.Unmarshal(val, &f); err != nil || math.IsInf(f, 0) {
		return 0, fieldErr(typ, join(prefix, name), "float64", "is out of range (fix: send a smaller number)")
	}
	return f, nil
}

func jsonList(typ, prefix, name string, val []byte) ([][]byte, error) {
	if val[0] != '[' {
		return nil, wrongType(typ, prefix, name, "list", val)
	}
	var out [][]byte
	i := jsonscan.SkipSpace(val, 1)
	if val[i] == ']' {
		return [][]byte{}, nil
	}
	for {
		end := jsonscan.SkipValue(val, i)
		out = append(out, val[i:end])
		i = jsonscan.SkipSpace(val, end)
		if val[i] == ']' {
			return out, nil
		}
		i = jsonscan.SkipSpace(val, i+1)
	}
}

func jsonObject(typ, prefix, name string, val []byte) error {
	if val[0] != '{' {
		return wrongType(typ, prefix, name, "object", val)
	}
	return nil
}

func unknownField(typ, prefix, key string, known []string) error {
	return fieldErr(typ, join(prefix, key), "closed struct", fmt.Sprintf("is not a declared field (fix: remove it; known fields: %s)", strings.Join(known, ", ")))
}

func duplicateField(typ, prefix, key string) error {
	return fieldErr(typ, join(prefix, key), "unique keys", "appears more than once (fix: send each field once)")
}

func missingField(typ, prefix, key string) error {
	return fieldErr(typ, join(prefix, key), "required", "is required (fix: add the field)")
}

// Every schema uses a different subset of the helpers above; referencing
// them all keeps the generated package free of unused-code findings.
var _ = [...]any{intp, appendString, appendBool, appendFloat, quoteTrunc, index, nest, join, jsonString, jsonBool, jsonInt, jsonUint, jsonFloat, jsonList, jsonObject, unknownField, duplicateField, missingField, (*decoder).float, (*decoder).flag, (*decoder).count, (*decoder).str, (*decoder).varint}
`
