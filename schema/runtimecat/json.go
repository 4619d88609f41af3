package runtimecat

import (
	"encoding/json"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/writ-dev/writ/schema/ir"
	"github.com/writ-dev/writ/schema/jsonscan"
)

// The JSON reader below follows the decoder writ gen emits field for field:
// the same syntax check, the same order of checks and the same error for
// every kind of bad input. Error paths are relative to the object being
// read and re-rooted by the caller (see under).

// decodeObject reads a JSON object whose members are fs into vals. data is
// known to be syntactically valid JSON.
func decodeObject(fs []*node, known string, data []byte, vals []value) *ir.FieldError {
	i := jsonscan.SkipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return fieldErr("", "json", "must be a JSON object")
	}
	i = jsonscan.SkipSpace(data, i+1)
	if data[i] != '}' {
		for {
			end := jsonscan.SkipString(data, i)
			rawKey := data[i:end]
			key := rawKey[1 : len(rawKey)-1]
			if jsonscan.HasEscape(rawKey) {
				var k string
				if err := json.Unmarshal(rawKey, &k); err != nil {
					return fieldErr("", "json", "has a malformed key")
				}
				key = []byte(k)
			}
			i = jsonscan.SkipSpace(data, end)
			i = jsonscan.SkipSpace(data, i+1) // ':'
			vend := jsonscan.SkipValue(data, i)
			fi := -1
			for j, f := range fs {
				if f.name == string(key) {
					fi = j
					break
				}
			}
			if fi < 0 {
				return fieldErr(member(string(key)), "closed struct", "is not a declared field (fix: remove it; known fields: "+known+")")
			}
			if vals[fi].set {
				return fieldErr(member(string(key)), "unique keys", "appears more than once (fix: send each field once)")
			}
			vals[fi].set = true
			if fe := decodeValue(fs[fi], data[i:vend], &vals[fi]); fe != nil {
				return under(member(fs[fi].name), fe)
			}
			i = jsonscan.SkipSpace(data, vend)
			if data[i] == '}' {
				break
			}
			i = jsonscan.SkipSpace(data, i+1) // ','
		}
	}
	for j, f := range fs {
		if !f.optional && !vals[j].set {
			return fieldErr(member(f.name), "required", "is required (fix: add the field)")
		}
	}
	return nil
}

// decodeValue reads one JSON value of node n into v (v.set is the
// caller's business). Errors name the value itself as "".
func decodeValue(n *node, val []byte, v *value) *ir.FieldError {
	switch n.kind {
	case ir.KindString:
		s, fe := jsonString(val)
		v.s = s
		return fe
	case ir.KindInt:
		x, fe := jsonInt(val)
		v.n = uint64(x)
		return fe
	case ir.KindUint:
		x, fe := jsonUint(val)
		v.n = x
		return fe
	case ir.KindFloat, ir.KindNumber:
		x, fe := jsonFloat(val, n.kind == ir.KindFloat)
		v.n = math.Float64bits(x)
		return fe
	case ir.KindBool:
		switch string(val) {
		case "true":
			v.n = 1
			return nil
		case "false":
			v.n = 0
			return nil
		}
		return wrongType("bool", val)
	case ir.KindStruct:
		if val[0] != '{' {
			return wrongType("object", val)
		}
		v.list = make([]value, len(n.fields))
		return decodeObject(n.fields, n.known, val, v.list)
	case ir.KindList:
		if val[0] != '[' {
			return wrongType("list", val)
		}
		return decodeList(n, val, v)
	}
	return fieldErr("", "type", "has no declared type (fix: correct the schema)")
}

func decodeList(n *node, val []byte, v *value) *ir.FieldError {
	count := 0
	i := jsonscan.SkipSpace(val, 1)
	if val[i] != ']' {
		for j := i; ; count++ {
			j = jsonscan.SkipSpace(val, jsonscan.SkipValue(val, j))
			if val[j] == ']' {
				count++
				break
			}
			j = jsonscan.SkipSpace(val, j+1)
		}
	}
	v.list = make([]value, count)
	if count == 0 {
		return nil
	}
	for k := 0; ; k++ {
		end := jsonscan.SkipValue(val, i)
		ev := val[i:end]
		switch {
		case n.item != nil:
			if ev[0] != '{' {
				return under(indexName(k), wrongType("object", ev))
			}
			it := &v.list[k]
			it.set = true
			it.list = make([]value, len(n.item.fields))
			if fe := decodeObject(n.item.fields, n.item.known, ev, it.list); fe != nil {
				return under(indexName(k), fe)
			}
		default:
			el := &v.list[k]
			el.set = true
			if fe := decodeValue(n.elem, ev, el); fe != nil {
				return under(indexName(k), fe)
			}
		}
		i = jsonscan.SkipSpace(val, end)
		if val[i] == ']' {
			return nil
		}
		i = jsonscan.SkipSpace(val, i+1)
	}
}

func wrongType(want string, val []byte) *ir.FieldError {
	return fieldErr("", want, "must be "+want+", not "+jsonscan.Kind(val)+" (fix: send "+want+")")
}

func jsonString(val []byte) (string, *ir.FieldError) {
	if val[0] != '"' {
		return "", wrongType("string", val)
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
			return "", wrongType("string", val)
		}
		return s, nil
	}
	return string(val[1 : len(val)-1]), nil
}

func jsonInt(val []byte) (int64, *ir.FieldError) {
	if !jsonscan.IsIntLiteral(val) {
		return 0, wrongType("integer", val)
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

func jsonUint(val []byte) (uint64, *ir.FieldError) {
	if !jsonscan.IsIntLiteral(val) {
		return 0, wrongType("integer", val)
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

func jsonFloat(val []byte, strict bool) (float64, *ir.FieldError) {
	if val[0] != '-' && (val[0] < '0' || val[0] > '9') {
		return 0, wrongType("number", val)
	}
	if strict && jsonscan.IsIntLiteral(val) {
		return 0, fieldErr("", "float", "must be a float literal with a fraction or exponent (fix: send e.g. 1.0)")
	}
	f, err := strconv.ParseFloat(string(val), 64)
	if err != nil || math.IsInf(f, 0) {
		return 0, fieldErr("", "float64", "is out of range (fix: send a smaller number)")
	}
	return f, nil
}
