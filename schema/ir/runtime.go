package ir

import (
	"fmt"
)

// Class decides how the pipeline treats an entry type: who waits for what and
// what happens under quorum loss. The zero value is deliberately invalid so
// that an unclassified type can never pass for a classified one.
type Class uint8

const (
	// ClassUnknown is the zero value: the type is not classified (W6).
	ClassUnknown Class = 0
	// ClassRequest: a requester waits for COMMITTED/REJECTED/UNAVAILABLE/UNCERTAIN.
	ClassRequest Class = 1
	// ClassFact: something that already happened; retained until committed.
	ClassFact Class = 2
	// ClassReceipt: a delivery acknowledged as received; items go through their own class.
	ClassReceipt Class = 3
	// ClassConfig: a configuration change with its own stage/activate barrier.
	ClassConfig Class = 4
)

// Classes lists every valid class in declaration order.
var Classes = []Class{ClassRequest, ClassFact, ClassReceipt, ClassConfig}

func (c Class) String() string {
	switch c {
	case ClassRequest:
		return "request"
	case ClassFact:
		return "fact"
	case ClassReceipt:
		return "receipt"
	case ClassConfig:
		return "config"
	}
	return fmt.Sprintf("unclassified(%d)", uint8(c))
}

// Valid reports whether c is one of the four declared classes.
func (c Class) Valid() bool { return c >= ClassRequest && c <= ClassConfig }

// ParseClass maps a schema class name to its Class.
func ParseClass(s string) (Class, bool) {
	for _, c := range Classes {
		if c.String() == s {
			return c, true
		}
	}
	return ClassUnknown, false
}

// FieldError is a validation failure that names the payload field and the
// rule it broke, so every public entry point can tell the caller what to fix.
type FieldError struct {
	Type  string // entry type, e.g. "job.submit"
	Field string // dotted path inside the payload, e.g. "items[2].job_id"
	Rule  string // the constraint, e.g. `=~"^[a-z0-9-]+$"` or "required"
	Msg   string // human explanation including the fix
}

func (e *FieldError) Error() string {
	return fmt.Sprintf("%s: field %q: %s (rule %s)", e.Type, e.Field, e.Msg, e.Rule)
}

// Payload is the generated typed payload of one entry type. Generated code
// implements it for every declared entry type; routing accessors return the
// values of the fields the schema names (key, to, order, id).
type Payload interface {
	// EntryType is the declared entry type name.
	EntryType() string
	// Validate checks every constraint the schema declares for the payload.
	// It returns a *FieldError for the first violation.
	Validate() error
	// AppendBinary appends the stable binary encoding of the payload.
	AppendBinary(b []byte) ([]byte, error)
	// Keys renders the schema's key templates: the state keys the entry
	// touches, which the handler receives with their current values.
	Keys() []string
	// InstanceKey is the value of the machine's key field ("" if the type
	// is bound to no machine).
	InstanceKey() string
	// TargetState is the value of the field named by `to` ("" if none).
	TargetState() string
	// Order is the value of the field named by `order` (ok=false if none).
	Order() (uint64, bool)
	// IdempotencyKey is the value of the field named by `id` ("" if none).
	IdempotencyKey() string
	// Items returns the carried items of a receipt type, each a payload of
	// its own declared type (nil for non-receipt types).
	Items() []Payload
}

// OrderScoper is implemented by the payloads of entry types that declare
// order_scope (generated payloads do): OrderScope is the value of that
// field, integers in decimal. The pipeline reads the field from the JSON
// payload when a payload does not implement it.
type OrderScoper interface {
	OrderScope() string
}

// TypeDesc is the generated runtime descriptor of one entry type.
type TypeDesc struct {
	Name    string
	Number  uint32
	Class   Class
	Machine *Machine // nil when the type is bound to no machine
	// Entry is the full declaration (fields, constraints, positions).
	Entry *Entry
	// ParseJSON decodes a JSON payload into the typed struct and validates
	// it. Unknown fields are an error naming the field.
	ParseJSON func([]byte) (Payload, error)
	// ParseBinary decodes the stable binary encoding and validates.
	ParseBinary func([]byte) (Payload, error)
}

// Catalog is what generated code exposes for one schema: the exhaustive
// classification table, the machines and their guard tables, and the
// payload codecs.
type Catalog interface {
	// Fingerprint is the schema's stable fingerprint (see Schema.Fingerprint).
	Fingerprint() string
	// Schema is the full model the code was generated from.
	Schema() *Schema
	// Type looks up a declared entry type; ok=false for an undeclared
	// (and therefore unclassified) type.
	Type(name string) (*TypeDesc, bool)
	// TypeByNumber looks up an entry type by its stable type number.
	TypeByNumber(n uint32) (*TypeDesc, bool)
	// Types lists every declared entry type in type-number order.
	Types() []*TypeDesc
	// Machine looks up a declared machine.
	Machine(name string) (*Machine, bool)
}
