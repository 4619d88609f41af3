// Package ir owns the validated plain-Go model of a writ schema (entry types,
// classes, machines, payload fields and constraints), its stable
// fingerprint, and the small runtime vocabulary (Class, Payload, TypeDesc,
// Catalog) that generated code implements. It imports neither
// cuelang.org/go nor any runtime package of the module.
package ir

// Pos is a source position in a .cue file.
type Pos struct {
	File string
	Line int
	Col  int
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
	// To names the payload field holding the target state ("" if none).
	To string
	// Order names the payload field giving per-key order ("" if none).
	Order string
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

// Field is one payload field. (Constraint detail is owned by the loader and
// generator; see constraints in this package.)
type Field struct {
	Name     string
	Optional bool
	Pos      Pos
}
