// Package jsonscan is the JSON syntax check that the code writ gen
// generates, the runtime catalog and the plugin SDK share: Valid accepts
// exactly what encoding/json.Valid accepts, in one pass and without
// allocating. Generated packages import it (as protobuf-go's generated code
// imports its runtime), so it stays on the standard library — in fact it
// imports nothing.
package jsonscan

// maxJSONDepth is encoding/json's nesting limit.
const maxJSONDepth = 10000

// Valid reports whether data is exactly one JSON value surrounded by
// optional whitespace, accepting what json.Valid accepts (in one pass,
// without json's per-byte state machine).
func Valid(data []byte) bool {
	var small [32]byte
	stack := small[:0] // '{' or '[' per open container
	i := SkipSpace(data, 0)
	for {
		// A value starts at i.
		if i >= len(data) {
			return false
		}
		switch c := data[i]; c {
		case '{', '[':
			if len(stack) >= maxJSONDepth {
				return false
			}
			i = SkipSpace(data, i+1)
			closing := byte('}')
			if c == '[' {
				closing = ']'
			}
			if i < len(data) && data[i] == closing {
				i++
				break
			}
			stack = append(stack, c)
			if c == '{' {
				if i = scanKey(data, i); i < 0 {
					return false
				}
			}
			continue
		case '"':
			i = scanString(data, i)
		case 't':
			i = scanLiteral(data, i, "true")
		case 'f':
			i = scanLiteral(data, i, "false")
		case 'n':
			i = scanLiteral(data, i, "null")
		default:
			i = scanNumber(data, i)
		}
		if i < 0 {
			return false
		}
		// After a value: close containers, or find the next element.
		for {
			i = SkipSpace(data, i)
			if len(stack) == 0 {
				return i == len(data)
			}
			if i >= len(data) {
				return false
			}
			top := stack[len(stack)-1]
			c := data[i]
			if (top == '{' && c == '}') || (top == '[' && c == ']') {
				stack = stack[:len(stack)-1]
				i++
				continue
			}
			if c != ',' {
				return false
			}
			i = SkipSpace(data, i+1)
			if top == '{' {
				if i = scanKey(data, i); i < 0 {
					return false
				}
			}
			break
		}
	}
}

// scanKey checks `"key" :` at i and returns the index after the colon and
// any whitespace (-1 when malformed).
func scanKey(data []byte, i int) int {
	if i >= len(data) || data[i] != '"' {
		return -1
	}
	if i = scanString(data, i); i < 0 {
		return -1
	}
	if i = SkipSpace(data, i); i >= len(data) || data[i] != ':' {
		return -1
	}
	return SkipSpace(data, i+1)
}

// scanString returns the index after the string starting at i (-1 when
// malformed: a control character, a bad escape, or no closing quote).
// Bytes >= 0x20 are taken as they are, as json.Valid does.
func scanString(data []byte, i int) int {
	for j := i + 1; j < len(data); j++ {
		switch c := data[j]; {
		case c == '"':
			return j + 1
		case c < 0x20:
			return -1
		case c == '\\':
			j++
			if j >= len(data) {
				return -1
			}
			switch data[j] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if j+4 >= len(data) {
					return -1
				}
				for k := j + 1; k <= j+4; k++ {
					h := data[k]
					if !('0' <= h && h <= '9' || 'a' <= h && h <= 'f' || 'A' <= h && h <= 'F') {
						return -1
					}
				}
				j += 4
			default:
				return -1
			}
		}
	}
	return -1
}

func scanLiteral(data []byte, i int, lit string) int {
	if len(data)-i < len(lit) || string(data[i:i+len(lit)]) != lit {
		return -1
	}
	return i + len(lit)
}

// scanNumber returns the index after the number starting at i (-1 when
// malformed): -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func scanNumber(data []byte, i int) int {
	if i < len(data) && data[i] == '-' {
		i++
	}
	if i >= len(data) {
		return -1
	}
	switch {
	case data[i] == '0':
		i++
	case '1' <= data[i] && data[i] <= '9':
		i = digits(data, i+1)
	default:
		return -1
	}
	if i < len(data) && data[i] == '.' {
		j := digits(data, i+1)
		if j == i+1 {
			return -1
		}
		i = j
	}
	if i < len(data) && (data[i] == 'e' || data[i] == 'E') {
		i++
		if i < len(data) && (data[i] == '+' || data[i] == '-') {
			i++
		}
		j := digits(data, i)
		if j == i {
			return -1
		}
		i = j
	}
	return i
}

func digits(data []byte, i int) int {
	for i < len(data) && '0' <= data[i] && data[i] <= '9' {
		i++
	}
	return i
}

// The primitives below read JSON already checked by Valid; the decoders of
// generated packages and of the runtime catalog walk a document with them.

// SkipSpace returns the index of the first non-whitespace byte at or after
// i.
func SkipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// HasEscape reports whether b contains a backslash.
func HasEscape(b []byte) bool {
	for _, c := range b {
		if c == '\\' {
			return true
		}
	}
	return false
}

// SkipString returns the index after the string starting at i (input is
// known-valid JSON).
func SkipString(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return len(b)
}

// SkipValue returns the index after the value starting at i.
func SkipValue(b []byte, i int) int {
	switch b[i] {
	case '"':
		return SkipString(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				j = SkipString(b, j) - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return len(b)
	}
	j := i
	for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' && b[j] != ' ' && b[j] != '\t' && b[j] != '\n' && b[j] != '\r' {
		j++
	}
	return j
}

// Kind names the kind of the value val starts with, for error messages
// ("a string", "an object", "a list", "a bool", "null", "a number").
func Kind(val []byte) string {
	switch val[0] {
	case '"':
		return "a string"
	case '{':
		return "an object"
	case '[':
		return "a list"
	case 't', 'f':
		return "a bool"
	case 'n':
		return "null"
	}
	return "a number"
}

// IsIntLiteral reports whether the number val is written as an integer
// (no fraction, no exponent).
func IsIntLiteral(val []byte) bool {
	if val[0] != '-' && (val[0] < '0' || val[0] > '9') {
		return false
	}
	for _, c := range val {
		if c == '.' || c == 'e' || c == 'E' {
			return false
		}
	}
	return true
}
