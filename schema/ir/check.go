package ir

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// Check validates the model's semantics (everything that does not need CUE
// to decide) and returns deterministic findings. The loader calls it after
// building the model; the generator refuses a model with any failing
// finding.
func (s *Schema) Check() []Finding {
	var out []Finding
	add := func(code string, st Status, pos Pos, subject, fix, format string, args ...any) {
		out = append(out, Finding{Code: code, Status: st, Pos: pos, Subject: subject, Msg: fmt.Sprintf(format, args...), Fix: fix})
	}
	for _, m := range s.Machines {
		out = append(out, m.check()...)
	}
	byNumber := map[uint32]*Entry{}
	for _, e := range s.Entries {
		subj := "entries." + e.Name
		if prev, dup := byNumber[e.Number]; dup {
			add(CodeDuplicateTypeNumber, StatusBlocked, e.Pos, subj,
				"give the new type an unused number; never renumber a type that has shipped",
				"entry type %q reuses type number %d of %q", e.Name, e.Number, prev.Name)
		} else {
			byNumber[e.Number] = e
		}
		if !e.Class.Valid() {
			add(CodeUnclassifiedType, StatusBlocked, e.Pos, subj,
				`add class: "request" | "fact" | "receipt" | "config"`,
				"entry type %q has no class", e.Name)
		}
		out = append(out, s.checkEntry(e)...)
	}
	out = append(out, s.checkTargets()...)
	out = append(out, s.checkOrderScopes()...)
	SortFindings(out)
	return out
}

// checkTargets reports machines whose instances no entry type can create
// and states no entry type moves an instance into.
func (s *Schema) checkTargets() []Finding {
	var out []Finding
	for _, m := range s.Machines {
		targeted := map[string]bool{}
		for _, e := range s.Entries {
			if e.Machine != m.Name {
				continue
			}
			if e.ToState != "" {
				targeted[e.ToState] = true
			}
			for _, st := range e.ToMap {
				targeted[st] = true
			}
			if e.To != "" && e.ToMap == nil {
				if f, ok := e.Field(e.To); ok {
					for _, v := range f.Enum {
						targeted[v] = true
					}
				}
			}
		}
		subj := "machines." + m.Name
		creator := false
		for _, st := range m.Initial {
			creator = creator || targeted[st]
		}
		if !creator && len(m.Initial) > 0 {
			out = append(out, Finding{Code: CodeNoCreator, Status: StatusIncomplete, Pos: m.Pos, Subject: subj,
				Msg: fmt.Sprintf("machine %q: no entry type moves a new instance into an initial state %v, so no instance can ever exist", m.Name, m.Initial),
				Fix: fmt.Sprintf("declare an entry type with machine: %q and a target in %v", m.Name, m.Initial)})
		}
		for _, st := range m.States {
			if !targeted[st] && m.HasState(st) {
				out = append(out, Finding{Code: CodeStateNotTargeted, Status: StatusReviewRequired, Pos: m.Pos, Subject: subj,
					Msg: fmt.Sprintf("machine %q: no entry type targets state %s (only handler-implied transitions can reach it)", m.Name, st),
					Fix: fmt.Sprintf("add an entry type whose to names %s, or confirm that a handler's transitions reach it", st)})
			}
		}
	}
	return out
}

func (m *Machine) check() []Finding {
	var out []Finding
	subj := "machines." + m.Name
	add := func(code string, st Status, fix, format string, args ...any) {
		out = append(out, Finding{Code: code, Status: st, Pos: m.Pos, Subject: subj, Msg: fmt.Sprintf(format, args...), Fix: fix})
	}
	seen := map[string]bool{}
	for _, st := range m.States {
		if seen[st] {
			add(CodeSchemaInvalid, StatusBlocked, "list each state once", "machine %q declares state %s twice", m.Name, st)
		}
		seen[st] = true
	}
	unknown := func(where, st string) {
		add(CodeGuardUnknownState, StatusBlocked, fmt.Sprintf("declare %s in machines.%s.states or fix the spelling", st, m.Name),
			"machine %q: %s names unknown state %s", m.Name, where, st)
	}
	for _, st := range m.Initial {
		if !seen[st] {
			unknown("initial", st)
		}
	}
	for _, st := range m.Terminal {
		if !seen[st] {
			unknown("terminal", st)
		}
	}
	froms := make([]string, 0, len(m.Transitions))
	for from := range m.Transitions {
		froms = append(froms, from)
	}
	sort.Strings(froms)
	for _, from := range froms {
		if !seen[from] {
			unknown("transitions", from)
		}
		for _, to := range m.Transitions[from] {
			if !seen[to] {
				unknown("transitions."+from, to)
			}
		}
		if m.IsTerminal(from) && len(m.Transitions[from]) > 0 {
			add(CodeTerminalHasExit, StatusBlocked,
				fmt.Sprintf("remove transitions.%s or drop %s from terminal", from, from),
				"machine %q: terminal state %s has outgoing transitions %v", m.Name, from, m.Transitions[from])
		}
	}
	reach := map[string]bool{}
	queue := append([]string(nil), m.Initial...)
	for len(queue) > 0 {
		st := queue[0]
		queue = queue[1:]
		if reach[st] {
			continue
		}
		reach[st] = true
		queue = append(queue, m.Transitions[st]...)
	}
	for _, st := range m.States {
		if !reach[st] {
			add(CodeUnreachableState, StatusReviewRequired,
				fmt.Sprintf("add a transition into %s or remove the state", st),
				"machine %q: state %s is not reachable from an initial state", m.Name, st)
		}
	}
	return out
}

var keyVarRE = regexp.MustCompile(`\{([^{}]*)\}`)

// KeyVars returns the payload field names a key template refers to.
func KeyVars(tmpl string) []string {
	var vars []string
	for _, m := range keyVarRE.FindAllStringSubmatch(tmpl, -1) {
		vars = append(vars, m[1])
	}
	return vars
}

func (s *Schema) checkEntry(e *Entry) []Finding {
	var out []Finding
	subj := "entries." + e.Name
	add := func(code string, st Status, pos Pos, fix, format string, args ...any) {
		if pos.File == "" {
			pos = e.Pos
		}
		out = append(out, Finding{Code: code, Status: st, Pos: pos, Subject: subj, Msg: fmt.Sprintf(format, args...), Fix: fix})
	}
	// needField reports a routing field that must be a required scalar.
	needField := func(role, name string, kinds ...Kind) *Field {
		f, ok := e.Field(name)
		if !ok {
			add(CodeUnknownField, StatusBlocked, e.Pos, fmt.Sprintf("declare payload.%s or fix %s", name, role),
				"entry type %q: %s names field %q, which the payload does not declare", e.Name, role, name)
			return nil
		}
		for _, k := range kinds {
			if f.Kind == k {
				return f
			}
		}
		add(CodeBadFieldType, StatusBlocked, f.Pos, fmt.Sprintf("make payload.%s a %v", name, kinds),
			"entry type %q: %s field %q is a %s", e.Name, role, name, f.Kind)
		return nil
	}
	var m *Machine
	if e.Machine != "" {
		var ok bool
		if m, ok = s.Machine(e.Machine); !ok {
			add(CodeUnknownMachine, StatusBlocked, e.Pos, "declare machines."+e.Machine+" or fix the name",
				"entry type %q names unknown machine %q", e.Name, e.Machine)
		} else if f := needField("machine key", m.Key, KindString); f != nil && f.Optional {
			add(CodeBadFieldType, StatusBlocked, f.Pos, "make payload."+m.Key+" required",
				"entry type %q: machine key field %q is optional", e.Name, m.Key)
		}
	}
	hasTo := e.To != "" || e.ToState != ""
	if hasTo && e.Machine == "" {
		add(CodeUnknownMachine, StatusBlocked, e.Pos, "add machine: <name> or remove to",
			"entry type %q declares a target state but no machine", e.Name)
	}
	unknownState := func(pos Pos, st, where string) {
		add(CodeGuardUnknownState, StatusBlocked, pos, fmt.Sprintf("use one of %v or declare %s in machines.%s.states", m.States, st, m.Name),
			"entry type %q: %s names state %s, unknown to machine %q", e.Name, where, st, m.Name)
	}
	if e.ToState != "" && m != nil && !m.HasState(e.ToState) {
		unknownState(e.Pos, e.ToState, "to.state")
	}
	if e.To != "" {
		if f := needField("to", e.To, KindString); f != nil {
			if f.Optional {
				add(CodeBadFieldType, StatusBlocked, f.Pos, "make payload."+f.Name+" required",
					"entry type %q: target field %q is optional", e.Name, f.Name)
			}
			if len(f.Enum) == 0 {
				add(CodeBadFieldType, StatusBlocked, f.Pos, `declare the field as a disjunction of literals, e.g. "A" | "B"`,
					"entry type %q: target field %q is not an enum", e.Name, f.Name)
			}
			if e.ToMap != nil {
				for _, v := range f.Enum {
					if _, ok := e.ToMap[v]; !ok {
						add(CodeNoTransition, StatusIncomplete, f.Pos, fmt.Sprintf("add %q to to.map", v),
							"entry type %q: value %q of field %q maps to no state", e.Name, v, f.Name)
					}
				}
				keys := make([]string, 0, len(e.ToMap))
				for k := range e.ToMap {
					keys = append(keys, k)
				}
				sort.Strings(keys)
				for _, k := range keys {
					if !contains(f.Enum, k) {
						add(CodeNoTransition, StatusReviewRequired, f.Pos, fmt.Sprintf("remove %q from to.map or add it to the field's values", k),
							"entry type %q: to.map key %q is not a value of field %q", e.Name, k, f.Name)
					}
					if m != nil && !m.HasState(e.ToMap[k]) {
						unknownState(e.Pos, e.ToMap[k], "to.map."+k)
					}
				}
			} else if m != nil {
				for _, v := range f.Enum {
					if !m.HasState(v) {
						unknownState(f.Pos, v, "to field "+f.Name)
					}
				}
			}
		}
	}
	if e.Order != "" {
		needField("order", e.Order, KindUint, KindInt)
	}
	if e.ID != "" {
		if f := needField("id", e.ID, KindString); f != nil && f.Optional {
			add(CodeBadFieldType, StatusBlocked, f.Pos, "make payload."+f.Name+" required",
				"entry type %q: idempotency field %q is optional", e.Name, f.Name)
		}
	}
	if e.Class == ClassFact && e.ID == "" {
		add(CodeFactWithoutID, StatusIncomplete, e.Pos, `add id: "<field>" naming a unique report ID field`,
			"fact type %q has no idempotency key; duplicates cannot be recognised", e.Name)
	}
	for _, k := range e.Keys {
		if strings.Count(k, "{") != strings.Count(k, "}") || strings.Contains(k, "{}") {
			add(CodeBadKeyTemplate, StatusBlocked, e.Pos, "write templates like \"job/{job_id}\"",
				"entry type %q: malformed key template %q", e.Name, k)
			continue
		}
		for _, v := range KeyVars(k) {
			f := needField("key template "+k, v, KindString, KindInt, KindUint)
			if f != nil && f.Optional {
				add(CodeBadKeyTemplate, StatusBlocked, f.Pos, "make payload."+v+" required",
					"entry type %q: key template %q uses optional field %q", e.Name, k, v)
			}
		}
	}
	for _, f := range e.Fields {
		for _, msg := range fieldProblems(f.Name, f) {
			add(CodeBadFieldType, StatusBlocked, f.Pos, "fix the field declaration", "entry type %q: %s", e.Name, msg)
		}
	}
	switch {
	case e.Class == ClassReceipt && e.Item == "":
		add(CodeBadItems, StatusIncomplete, e.Pos, `add items: {field: "items", type: "<entry type>"}`,
			"receipt type %q carries no items", e.Name)
	case e.Item != "" && e.Class != ClassReceipt && e.Class.Valid():
		add(CodeBadItems, StatusBlocked, e.Pos, `remove items or make the type class: "receipt"`,
			"entry type %q declares items but is a %s", e.Name, e.Class)
	}
	if e.Item != "" {
		it, ok := s.Entry(e.Item)
		switch {
		case !ok:
			add(CodeBadItems, StatusBlocked, e.Pos, "declare entries."+e.Item+" or fix items.type",
				"entry type %q: items.type %q is not a declared entry type", e.Name, e.Item)
		case it.Class == ClassReceipt:
			add(CodeBadItems, StatusBlocked, e.Pos, "carry request or fact items only",
				"entry type %q: item type %q is itself a receipt", e.Name, e.Item)
		}
		if f := needField("items.field", e.ItemsField, KindList); f != nil && f.ItemType != e.Item {
			add(CodeBadItems, StatusBlocked, f.Pos, "declare the field as a list of the item type's payload",
				"entry type %q: field %q does not carry %q payloads", e.Name, e.ItemsField, e.Item)
		}
	}
	return out
}

// fieldProblems checks that a field is something the generator can emit
// (the loader only builds such fields; hand-built models are checked too).
func fieldProblems(path string, f *Field) []string {
	var out []string
	bad := func(format string, args ...any) { out = append(out, path+": "+fmt.Sprintf(format, args...)) }
	switch f.Kind {
	case KindString, KindInt, KindUint, KindFloat, KindNumber, KindBool:
	case KindList:
		switch {
		case f.Elem == nil && f.ItemType == "":
			bad("list without an element type")
		case f.Elem != nil && f.ItemType != "":
			bad("list with both an element type and an item type")
		case f.Elem != nil:
			if f.Elem.Optional {
				bad("optional list element")
			}
			out = append(out, fieldProblems(path+"[]", f.Elem)...)
		}
	case KindStruct:
		if f.Fields == nil {
			bad("struct without fields")
		}
		for _, sf := range f.Fields {
			out = append(out, fieldProblems(path+"."+sf.Name, sf)...)
		}
	default:
		bad("field without a type")
	}
	if len(f.Enum) > 0 && f.Kind != KindString {
		bad("enum on a %s", f.Kind)
	}
	if len(f.Patterns) > 0 && f.Kind != KindString {
		bad("pattern on a %s", f.Kind)
	}
	for _, p := range f.Patterns {
		if _, err := regexp.Compile(p); err != nil {
			bad("pattern %q does not compile: %v", p, err)
		}
	}
	if (f.MinLen != nil || f.MaxLen != nil) && f.Kind != KindString && f.Kind != KindList {
		bad("length limit on a %s", f.Kind)
	}
	if (f.Min != nil || f.Max != nil) && f.Kind != KindInt && f.Kind != KindUint && f.Kind != KindFloat && f.Kind != KindNumber {
		bad("numeric bound on a %s", f.Kind)
	}
	return out
}
