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
	sum := sha256.Sum256(append([]byte("writ-schema-v2\n"), b...))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// The normalized model has its own types with explicit JSON names, so the
// fingerprint does not depend on how the public model types marshal.
type normSchema struct {
	Entries  []normEntry   `json:"entries"`
	Machines []normMachine `json:"machines"`
}

type normEntry struct {
	Name       string            `json:"name"`
	Number     uint32            `json:"number"`
	Class      string            `json:"class"`
	Machine    string            `json:"machine"`
	To         string            `json:"to"`
	ToState    string            `json:"to_state"`
	ToMap      map[string]string `json:"to_map"`
	Order      string            `json:"order"`
	OrderScope string            `json:"order_scope,omitempty"`
	ID         string            `json:"id"`
	Item       string            `json:"item"`
	ItemsField string            `json:"items_field"`
	Keys       []string          `json:"keys"`
	Fields     []normField       `json:"fields"`
}

type normField struct {
	Name     string      `json:"name"`
	Optional bool        `json:"optional"`
	Kind     string      `json:"kind"`
	Enum     []string    `json:"enum"`
	Patterns []string    `json:"patterns"`
	MinLen   *int        `json:"min_len"`
	MaxLen   *int        `json:"max_len"`
	Min      *normBound  `json:"min"`
	Max      *normBound  `json:"max"`
	Elem     *normField  `json:"elem"`
	Fields   []normField `json:"fields"`
	ItemType string      `json:"item_type"`
}

type normBound struct {
	Value     string `json:"value"`
	Exclusive bool   `json:"exclusive"`
}

type normMachine struct {
	Name        string              `json:"name"`
	Key         string              `json:"key"`
	States      []string            `json:"states"`
	Initial     []string            `json:"initial"`
	Terminal    []string            `json:"terminal"`
	Transitions map[string][]string `json:"transitions"`
}

func normalize(s *Schema) normSchema {
	var n normSchema
	for _, e := range s.Entries {
		n.Entries = append(n.Entries, normEntry{
			Name: e.Name, Number: e.Number, Class: e.Class.String(), Machine: e.Machine,
			To: e.To, ToState: e.ToState, ToMap: e.ToMap, Order: e.Order, OrderScope: e.OrderScope, ID: e.ID,
			Item: e.Item, ItemsField: e.ItemsField, Keys: e.Keys, Fields: normFields(e.Fields),
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

func normFields(fs []*Field) []normField {
	if fs == nil {
		return nil
	}
	out := make([]normField, len(fs))
	for i, f := range fs {
		out[i] = *normOne(f)
	}
	return out
}

func normOne(f *Field) *normField {
	if f == nil {
		return nil
	}
	return &normField{
		Name: f.Name, Optional: f.Optional, Kind: f.Kind.String(), Enum: f.Enum, Patterns: f.Patterns,
		MinLen: f.MinLen, MaxLen: f.MaxLen, Min: normB(f.Min), Max: normB(f.Max),
		Elem: normOne(f.Elem), Fields: normFields(f.Fields), ItemType: f.ItemType,
	}
}

func normB(b *Bound) *normBound {
	if b == nil {
		return nil
	}
	return &normBound{Value: b.Value, Exclusive: b.Exclusive}
}
