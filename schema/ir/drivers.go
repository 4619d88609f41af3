package ir

import "sort"

// Driver is an entry type that can move an instance of a machine into a
// state: Label is the type's name, or "type:value" when the target comes
// from a mapped payload value.
type Driver struct {
	State string
	Label string
}

// Drivers lists, for machine m, which entry types can move an instance into
// each state, as the declarations say: a fixed target (`to: state`), each
// value of a mapped field (`to: field` with a map), or each enum value of a
// target field that names the state directly. Transitions only a handler
// implies have no driver. The result maps state → labels in entry order.
func (s *Schema) Drivers(m *Machine) map[string][]string {
	out := map[string][]string{}
	for _, e := range s.Entries {
		if e.Machine != m.Name {
			continue
		}
		for _, d := range e.drivers() {
			out[d.State] = append(out[d.State], d.Label)
		}
	}
	return out
}

func (e *Entry) drivers() []Driver {
	switch {
	case e.ToState != "":
		return []Driver{{e.ToState, e.Name}}
	case e.ToMap != nil:
		vals := make([]string, 0, len(e.ToMap))
		for v := range e.ToMap {
			vals = append(vals, v)
		}
		sort.Strings(vals)
		ds := make([]Driver, 0, len(vals))
		for _, v := range vals {
			ds = append(ds, Driver{e.ToMap[v], e.Name + ":" + v})
		}
		return ds
	case e.To != "":
		f, ok := e.Field(e.To)
		if !ok {
			return nil
		}
		ds := make([]Driver, 0, len(f.Enum))
		for _, v := range f.Enum {
			ds = append(ds, Driver{v, e.Name})
		}
		return ds
	}
	return nil
}
