package pipeline

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/writ-dev/writ/schema/ir"
)

// MachineRecord is the pipeline-owned value at _m/<machine>/<instance>.
type MachineRecord struct {
	State    string
	Order    uint64
	HasOrder bool
	// Scope is the instance's current order epoch (HasScope): the value
	// of the order_scope field of the entry that opened it.
	Scope    string
	HasScope bool
}

// AppendJSON appends the canonical encoding
// {"state":"S","scope":"E","order":N} (scope and order when present).
func (r MachineRecord) AppendJSON(b []byte) []byte {
	if b == nil {
		b = make([]byte, 0, len(r.State)+40)
	}
	b = append(b, `{"state":`...)
	if plainASCII(r.State) {
		b = append(b, '"')
		b = append(b, r.State...)
		b = append(b, '"')
	} else {
		b = strconv.AppendQuote(b, r.State)
	}
	if r.HasScope {
		b = append(b, `,"scope":`...)
		b = appendJSONString(b, r.Scope)
	}
	if r.HasOrder {
		b = append(b, `,"order":`...)
		b = strconv.AppendUint(b, r.Order, 10)
	}
	return append(b, '}')
}

// appendJSONString appends s as a JSON string.
func appendJSONString(b []byte, s string) []byte {
	if plainASCII(s) {
		b = append(b, '"')
		b = append(b, s...)
		return append(b, '"')
	}
	q, _ := json.Marshal(s) // a string always marshals
	return append(b, q...)
}

// plainASCII reports whether strconv.Quote would only wrap s in quotes:
// printable ASCII without quotes or backslashes.
func plainASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// ParseMachineRecord decodes a machine record value.
func ParseMachineRecord(v []byte) (MachineRecord, error) {
	return parseMachineRecord(v, nil)
}

// parseMachineRecord decodes a machine record value. The canonical form
// AppendJSON writes is decoded directly (with the state name taken from m's
// declared states when it is one, so it needs no allocation); anything else
// goes through encoding/json, which decides what is accepted.
func parseMachineRecord(v []byte, m *ir.Machine) (MachineRecord, error) {
	if r, ok := parseCanonicalRecord(v, m); ok {
		return r, nil
	}
	var raw struct {
		State string  `json:"state"`
		Scope *string `json:"scope"`
		Order *uint64 `json:"order"`
	}
	if err := json.Unmarshal(v, &raw); err != nil {
		return MachineRecord{}, fmt.Errorf("pipeline: machine record: %w", err)
	}
	if raw.State == "" {
		return MachineRecord{}, errors.New(`pipeline: machine record: field "state" is required`)
	}
	r := MachineRecord{State: raw.State}
	if raw.Order != nil {
		r.Order, r.HasOrder = *raw.Order, true
	}
	if raw.Scope != nil {
		r.Scope, r.HasScope = *raw.Scope, true
	}
	return r, nil
}

// parseCanonicalRecord decodes exactly {"state":"S"}, optionally followed
// by ,"scope":"E" and then ,"order":N, with S (non-empty) and E printable
// ASCII without quotes or backslashes and N a canonical decimal that fits in uint64; ok=false for
// anything else (the caller falls back to encoding/json).
func parseCanonicalRecord(v []byte, m *ir.Machine) (MachineRecord, bool) {
	const head = `{"state":"`
	if len(v) < len(head)+3 || string(v[:len(head)]) != head || v[len(v)-1] != '}' {
		return MachineRecord{}, false
	}
	rest := v[len(head) : len(v)-1]
	state, rest, ok := plainQuoted(rest)
	if !ok || len(state) == 0 {
		return MachineRecord{}, false
	}
	var r MachineRecord
	const scope = `,"scope":"`
	if len(rest) >= len(scope) && string(rest[:len(scope)]) == scope {
		var sc []byte
		if sc, rest, ok = plainQuoted(rest[len(scope):]); !ok {
			return MachineRecord{}, false
		}
		r.Scope, r.HasScope = string(sc), true
	}
	if len(rest) > 0 {
		const order = `,"order":`
		if len(rest) <= len(order) || string(rest[:len(order)]) != order {
			return MachineRecord{}, false
		}
		digits := rest[len(order):]
		if len(digits) > 1 && digits[0] == '0' {
			return MachineRecord{}, false
		}
		var n uint64
		for _, c := range digits {
			if c < '0' || c > '9' {
				return MachineRecord{}, false
			}
			d := uint64(c - '0')
			if n > (math.MaxUint64-d)/10 {
				return MachineRecord{}, false
			}
			n = n*10 + d
		}
		r.Order, r.HasOrder = n, true
	}
	r.State = internState(m, state)
	return r, true
}

// plainQuoted splits b, which follows an opening quote, at the closing
// quote: the content (printable ASCII without backslashes) and what
// follows the quote; ok=false when b holds anything else.
func plainQuoted(b []byte) (content, rest []byte, ok bool) {
	for i, c := range b {
		if c == '"' {
			return b[:i], b[i+1:], true
		}
		if c < 0x20 || c > 0x7e || c == '\\' {
			return nil, nil, false
		}
	}
	return nil, nil, false
}

// internState returns s as a string, reusing m's declared state name when
// it is one.
func internState(m *ir.Machine, s []byte) string {
	if m != nil {
		for _, st := range m.States {
			if st == string(s) {
				return st
			}
		}
	}
	return string(s)
}
