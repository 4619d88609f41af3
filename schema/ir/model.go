package ir

// Pos is a source position in a .cue file.
type Pos struct {
	File string `json:"file"`
	Line int    `json:"line"`
	Col  int    `json:"col"`
}

// Schema is a whole validated declaration set.
type Schema struct {
	// Package is the Go package name generated code uses.
	Package  string
	Entries  []*Entry   // sorted by Number
	Machines []*Machine // sorted by Name
}

// Entry is one declared entry type.
type Entry struct {
	Name   string
	Number uint32
	Class  Class
	// Machine names the machine the type drives ("" if none).
	Machine string
	// To names the payload field holding the target state, or (with ToMap)
	// the field whose value maps to the target state ("" if none).
	To string
	// ToState is a fixed target state ("" if none); set when the schema
	// says `to: state: "PENDING"`.
	ToState string
	// ToMap maps values of the To field to target states (nil if none).
	ToMap map[string]string
	// Order names the payload field giving per-key order ("" if none).
	Order string
	// OrderScope names the payload field whose value scopes the order of
	// the instance ("" if none): an entry that declares it without Order
	// opens a new order epoch for the instance (the recorded order resets
	// and the epoch takes the field's value); an entry that declares it
	// with Order is ordered within the epoch its value names. See
	// docs/schema.md, "Order and order epochs".
	OrderScope string
	// ID names the payload field that is the idempotency key ("" if none).
	ID string
	// Keys are key templates such as "job/{job_id}".
	Keys []string
	// Item names the entry type of each item a receipt carries ("" if none)
	// and ItemsField the list field that holds them.
	Item       string
	ItemsField string
	Fields     []*Field
	Doc        string
	Pos        Pos
}

// Machine is a declared state machine over instances named by a key field.
type Machine struct {
	Name        string
	Key         string
	States      []string
	Initial     []string
	Terminal    []string
	Transitions map[string][]string
	Pos         Pos
}

// HasState reports whether s is a declared state.
func (m *Machine) HasState(s string) bool { return contains(m.States, s) }

// IsInitial reports whether s is an initial state.
func (m *Machine) IsInitial(s string) bool { return contains(m.Initial, s) }

// IsTerminal reports whether s is a terminal state.
func (m *Machine) IsTerminal(s string) bool { return contains(m.Terminal, s) }

// Allowed reports whether from → to is a declared transition.
func (m *Machine) Allowed(from, to string) bool { return contains(m.Transitions[from], to) }

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// Field is one payload field with the constraints the generator compiles
// into Validate. The loader refuses any CUE constraint that cannot be
// expressed here (WRIT_UNSUPPORTED_CONSTRAINT) instead of dropping it.
type Field struct {
	Name     string
	Optional bool
	Pos      Pos
	Kind     Kind
	// Enum lists the allowed literal values of a string field (nil: any).
	Enum []string `json:",omitempty"`
	// Patterns are regular expressions (RE2, unanchored) the value must
	// all match.
	Patterns []string `json:",omitempty"`
	// MinLen and MaxLen bound the rune count of a string or the item count
	// of a list (nil: unbounded).
	MinLen *int `json:",omitempty"`
	MaxLen *int `json:",omitempty"`
	// Min and Max bound a number; Value is a decimal literal.
	Min *Bound `json:",omitempty"`
	Max *Bound `json:",omitempty"`
	// Elem describes each element of a list whose elements are not entry
	// payloads.
	Elem *Field `json:",omitempty"`
	// Fields are the members of a nested struct.
	Fields []*Field `json:",omitempty"`
	// ItemType names the entry type of each element of a list of payloads
	// (a receipt's items).
	ItemType string `json:",omitempty"`
	Doc      string `json:",omitempty"`
}

// Kind is the Go-level type of a payload field.
type Kind uint8

const (
	// KindInvalid is the zero value: a field without a type.
	KindInvalid Kind = iota
	// KindString is a UTF-8 string.
	KindString
	// KindInt is an integer whose declared range fits int64.
	KindInt
	// KindUint is a non-negative integer whose range needs uint64.
	KindUint
	// KindFloat is a CUE float (JSON numbers must carry a fraction or exponent).
	KindFloat
	// KindNumber is a CUE number (int or float), carried as float64.
	KindNumber
	// KindBool is a boolean.
	KindBool
	// KindList is a list (Elem or ItemType describes its elements).
	KindList
	// KindStruct is a nested struct (Fields).
	KindStruct
)

func (k Kind) String() string {
	switch k {
	case KindString:
		return "string"
	case KindInt:
		return "int"
	case KindUint:
		return "uint"
	case KindFloat:
		return "float"
	case KindNumber:
		return "number"
	case KindBool:
		return "bool"
	case KindList:
		return "list"
	case KindStruct:
		return "struct"
	}
	return "invalid"
}

// Bound is one end of a numeric range.
type Bound struct {
	Value     string // decimal literal, e.g. "0", "1000", "0.5"
	Exclusive bool   // > or < instead of >= or <=
}

// Field returns the top-level payload field with the given name.
func (e *Entry) Field(name string) (*Field, bool) {
	for _, f := range e.Fields {
		if f.Name == name {
			return f, true
		}
	}
	return nil, false
}

// OpensEpoch reports whether the entry opens a new order epoch for its
// instance: it declares order_scope and no order.
func (e *Entry) OpensEpoch() bool { return e.OrderScope != "" && e.Order == "" }

// Target returns the target state of a payload whose To field (if any) has
// the value v; ok=false when the entry makes no transition or v maps to none.
func (e *Entry) Target(v string) (string, bool) {
	switch {
	case e.ToState != "":
		return e.ToState, true
	case e.ToMap != nil:
		s, ok := e.ToMap[v]
		return s, ok
	case e.To != "":
		return v, v != ""
	}
	return "", false
}

// Entry looks up an entry type by name.
func (s *Schema) Entry(name string) (*Entry, bool) {
	for _, e := range s.Entries {
		if e.Name == name {
			return e, true
		}
	}
	return nil, false
}

// Machine looks up a machine by name.
func (s *Schema) Machine(name string) (*Machine, bool) {
	for _, m := range s.Machines {
		if m.Name == name {
			return m, true
		}
	}
	return nil, false
}
