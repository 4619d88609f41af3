package runtimecat

import (
	"encoding/json"
	"math"
	"strconv"

	"github.com/writ-dev/writ/schema/ir"
)

// MarshalJSON renders the payload as encoding/json renders the generated
// struct of its type: fields in declaration order, an absent optional field
// (and an empty optional list, which the generated struct tags omitempty)
// left out.
func (p *payload) MarshalJSON() ([]byte, error) {
	return appendObject(make([]byte, 0, 64), p.e.fields, p.vals), nil
}

func appendObject(b []byte, fs []*node, vals []value) []byte {
	b = append(b, '{')
	first := true
	for i, f := range fs {
		v := &vals[i]
		if f.optional && (!v.set || (f.kind == ir.KindList && len(v.list) == 0)) {
			continue
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = appendJSONString(b, f.name)
		b = append(b, ':')
		b = appendJSONValue(b, f, v)
	}
	return append(b, '}')
}

func appendJSONValue(b []byte, n *node, v *value) []byte {
	switch n.kind {
	case ir.KindString:
		return appendJSONString(b, v.s)
	case ir.KindInt:
		return strconv.AppendInt(b, v.int(), 10)
	case ir.KindUint:
		return strconv.AppendUint(b, v.n, 10)
	case ir.KindFloat, ir.KindNumber:
		return appendJSONFloat(b, v.float())
	case ir.KindBool:
		return strconv.AppendBool(b, v.n != 0)
	case ir.KindStruct:
		return appendObject(b, n.fields, v.list)
	case ir.KindList:
		b = append(b, '[')
		if n.item != nil {
			for i := range v.list {
				if i > 0 {
					b = append(b, ',')
				}
				b = appendObject(b, n.item.fields, v.list[i].list)
			}
		} else {
			for i := range v.list {
				if i > 0 {
					b = append(b, ',')
				}
				b = appendJSONValue(b, n.elem, &v.list[i])
			}
		}
		return append(b, ']')
	}
	return append(b, "null"...)
}

// appendJSONString quotes s as encoding/json does (HTML-safe escapes
// included); plain printable ASCII takes the fast path.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always marshals
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// appendJSONFloat formats f as encoding/json formats a float64. A float
// that is not finite cannot be in a validated payload; it renders as null
// rather than failing the whole document.
func appendJSONFloat(b []byte, f float64) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(b, "null"...)
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// clean up e-09 to e-9
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}
