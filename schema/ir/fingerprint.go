package ir

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
)

// Fingerprint is the stable hash of the normalized model: entry types (name,
// number, class, machine, routing fields, keys, items, payload fields and
// constraints) and machines. Source positions and doc strings are left out,
// so reformatting or re-commenting a schema keeps its fingerprint; any change
// that alters behaviour or encoding changes it. The format is
// "sha256:<hex>".
func (s *Schema) Fingerprint() string {
	n := normalize(s)
	b, err := json.Marshal(n)
	if err != nil {
		// Every value in the normalized model is marshalable.
		panic("ir: fingerprint: " + err.Error())
	}
	sum := sha256.Sum256(append([]byte("writ-schema-v1\n"), b...))
	return "sha256:" + hex.EncodeToString(sum[:])
}

type normSchema struct {
	Entries  []normEntry
	Machines []normMachine
}

type normEntry struct {
	Name, Machine, To, ToState, Order, ID, Item, ItemsField string
	Number                                                  uint32
	Class                                                   string
	ToMap                                                   map[string]string
	Keys                                                    []string
	Fields                                                  []*Field
}

type normMachine struct {
	Name, Key                 string
	States, Initial, Terminal []string
	Transitions               map[string][]string
}

func normalize(s *Schema) normSchema {
	var n normSchema
	for _, e := range s.Entries {
		n.Entries = append(n.Entries, normEntry{
			Name: e.Name, Machine: e.Machine, To: e.To, ToState: e.ToState,
			Order: e.Order, ID: e.ID, Item: e.Item, ItemsField: e.ItemsField,
			Number: e.Number, Class: e.Class.String(), ToMap: e.ToMap,
			Keys: e.Keys, Fields: normFields(e.Fields),
		})
	}
	for _, m := range s.Machines {
		n.Machines = append(n.Machines, normMachine{
			Name: m.Name, Key: m.Key, States: m.States, Initial: m.Initial,
			Terminal: m.Terminal, Transitions: m.Transitions,
		})
	}
	return n
}

func normFields(fs []*Field) []*Field {
	if fs == nil {
		return nil
	}
	out := make([]*Field, len(fs))
	for i, f := range fs {
		out[i] = normField(f)
	}
	return out
}

func normField(f *Field) *Field {
	if f == nil {
		return nil
	}
	c := *f
	c.Pos = Pos{}
	c.Doc = ""
	c.Elem = normField(f.Elem)
	c.Fields = normFields(f.Fields)
	return &c
}
