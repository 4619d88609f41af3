package wire

import (
	"encoding/json"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/writ-dev/writ/schema/ir"
	"github.com/writ-dev/writ/schema/jsonscan"
)

// The readers below take one JSON value from inside a document that
// Document accepted, so they check the value's kind and range but never
// its syntax. Their errors name the value itself (Field ""); the caller
// places them with Under.

// Document checks that data, a whole payload, is one syntactically valid
// JSON object.
func Document(data []byte) *ir.FieldError {
	if !jsonscan.Valid(data) {
		return fieldErr("", "json", "is not valid JSON (fix: send a JSON object)")
	}
	i := jsonscan.SkipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return fieldErr("", "json", "must be a JSON object")
	}
	return nil
}

// Members iterates over the members of a JSON object in document order:
//
//	m := wire.MembersOf(obj)
//	for m.Next() {
//		... m.Key(), m.Value() ...
//	}
//	if err := m.Err(); err != nil { ... }
type Members struct {
	data     []byte
	i        int // start of the next key; -1 when done
	key, val []byte
	err      *ir.FieldError
}

// MembersOf returns an iterator over the members of obj, a JSON object
// (checked by Document or Object).
func MembersOf(obj []byte) Members {
	i := jsonscan.SkipSpace(obj, jsonscan.SkipSpace(obj, 0)+1)
	if obj[i] == '}' {
		i = -1
	}
	return Members{data: obj, i: i}
}

// Next advances to the next member; false at the end of the object or on
// a malformed key (see Err).
func (m *Members) Next() bool {
	if m.i < 0 {
		return false
	}
	data := m.data
	end := jsonscan.SkipString(data, m.i)
	rawKey := data[m.i:end]
	m.key = rawKey[1 : len(rawKey)-1]
	if jsonscan.HasEscape(rawKey) {
		var k string
		if err := json.Unmarshal(rawKey, &k); err != nil {
			m.err = fieldErr("", "json", "has a malformed key")
			m.i = -1
			return false
		}
		m.key = []byte(k)
	}
	i := jsonscan.SkipSpace(data, end)
	i = jsonscan.SkipSpace(data, i+1) // ':'
	vend := jsonscan.SkipValue(data, i)
	m.val = data[i:vend]
	i = jsonscan.SkipSpace(data, vend)
	if data[i] == '}' {
		m.i = -1
	} else {
		m.i = jsonscan.SkipSpace(data, i+1) // ','
	}
	return true
}

// Key is the current member's key, unescaped; valid until the next call
// of Next.
func (m *Members) Key() []byte { return m.key }

// Value is the current member's value, as it stands in the document.
func (m *Members) Value() []byte { return m.val }

// Err is the error that ended the iteration early (a key that does not
// unescape), or nil.
func (m *Members) Err() *ir.FieldError { return m.err }

// String reads a JSON string, which must be valid UTF-8.
func String(val []byte) (string, *ir.FieldError) {
	if val[0] != '"' {
		return "", WrongType("string", val)
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
		return "", fieldErr("", "string", "is not valid UTF-8 (fix: send UTF-8 text)")
	}
	if jsonscan.HasEscape(val) {
		var s string
		if err := json.Unmarshal(val, &s); err != nil {
			return "", WrongType("string", val)
		}
		return s, nil
	}
	return string(val[1 : len(val)-1]), nil
}

// Bool reads true or false.
func Bool(val []byte) (bool, *ir.FieldError) {
	switch string(val) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, WrongType("bool", val)
}

// Int reads an integer literal (no fraction, no exponent) in int64 range.
func Int(val []byte) (int64, *ir.FieldError) {
	if !jsonscan.IsIntLiteral(val) {
		return 0, WrongType("integer", val)
	}
	neg := val[0] == '-'
	digits := val
	if neg {
		digits = val[1:]
	}
	var u uint64
	for _, c := range digits {
		if u > (math.MaxUint64-9)/10 {
			return 0, fieldErr("", "int64", "is out of range (fix: send a smaller integer)")
		}
		u = u*10 + uint64(c-'0')
	}
	if neg {
		if u > 1<<63 {
			return 0, fieldErr("", "int64", "is out of range (fix: send a larger integer)")
		}
		return -int64(u), nil
	}
	if u > math.MaxInt64 {
		return 0, fieldErr("", "int64", "is out of range (fix: send a smaller integer)")
	}
	return int64(u), nil
}

// Uint reads a non-negative integer literal in uint64 range ("-0" is 0).
func Uint(val []byte) (uint64, *ir.FieldError) {
	if !jsonscan.IsIntLiteral(val) {
		return 0, WrongType("integer", val)
	}
	if val[0] == '-' {
		if string(val) == "-0" {
			return 0, nil
		}
		return 0, fieldErr("", ">=0", "must be >= 0 (fix: send a non-negative integer)")
	}
	var u uint64
	for _, c := range val {
		d := uint64(c - '0')
		if u > (math.MaxUint64-d)/10 {
			return 0, fieldErr("", "uint64", "is out of range (fix: send a smaller integer)")
		}
		u = u*10 + d
	}
	return u, nil
}

// Float reads a number in float64 range. strict (a float field, as opposed
// to a number field) refuses an integer literal.
func Float(val []byte, strict bool) (float64, *ir.FieldError) {
	if val[0] != '-' && (val[0] < '0' || val[0] > '9') {
		return 0, WrongType("number", val)
	}
	if strict && jsonscan.IsIntLiteral(val) {
		return 0, fieldErr("", "float", "must be a float literal with a fraction or exponent (fix: send e.g. 1.0)")
	}
	// encoding/json reads a number into a float64 with the same call.
	f, err := strconv.ParseFloat(string(val), 64)
	if err != nil || math.IsInf(f, 0) {
		return 0, fieldErr("", "float64", "is out of range (fix: send a smaller number)")
	}
	return f, nil
}

// Object checks that val is a JSON object (read it with MembersOf).
func Object(val []byte) *ir.FieldError {
	if val[0] != '{' {
		return WrongType("object", val)
	}
	return nil
}

// List reads a JSON array into its elements, as they stand in the
// document; an empty array is an empty, non-nil slice.
func List(val []byte) ([][]byte, *ir.FieldError) {
	if val[0] != '[' {
		return nil, WrongType("list", val)
	}
	i := jsonscan.SkipSpace(val, 1)
	if val[i] == ']' {
		return [][]byte{}, nil
	}
	var out [][]byte
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
