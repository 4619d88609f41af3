package load

import (
	"fmt"
	"sort"
	"strings"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/ast"

	"github.com/writ-dev/writ/schema/ir"
)

type builder struct {
	r *Result
}

func (b *builder) unsupported(p ir.Pos, subject, msg, fix string) {
	b.r.Findings = append(b.r.Findings, ir.Finding{Code: ir.CodeUnsupportedConstraint, Status: ir.StatusBlocked,
		Pos: p, Subject: subject, Msg: msg, Fix: fix})
}

func (b *builder) invalid(p ir.Pos, subject, msg, fix string) {
	b.r.Findings = append(b.r.Findings, ir.Finding{Code: ir.CodeSchemaInvalid, Status: ir.StatusBlocked,
		Pos: p, Subject: subject, Msg: msg, Fix: fix})
}

func str(v cue.Value, p string) string {
	s, _ := v.LookupPath(cue.ParsePath(p)).String()
	return s
}

func strList(v cue.Value) []string {
	var out []string
	it, err := v.List()
	if err != nil {
		return nil
	}
	for it.Next() {
		s, _ := it.Value().String()
		out = append(out, s)
	}
	return out
}

func (b *builder) schema(v cue.Value) *ir.Schema {
	s := &ir.Schema{Package: str(v, "go_package")}
	if it, err := v.LookupPath(cue.ParsePath("machines")).Fields(); err == nil {
		for it.Next() {
			s.Machines = append(s.Machines, b.machine(it.Selector().Unquoted(), it.Value()))
		}
	}
	sort.Slice(s.Machines, func(i, j int) bool { return s.Machines[i].Name < s.Machines[j].Name })
	if it, err := v.LookupPath(cue.ParsePath("entries")).Fields(); err == nil {
		for it.Next() {
			s.Entries = append(s.Entries, b.entry(it.Selector().Unquoted(), it.Value()))
		}
	}
	sort.SliceStable(s.Entries, func(i, j int) bool { return s.Entries[i].Number < s.Entries[j].Number })
	return s
}

func (b *builder) machine(name string, v cue.Value) *ir.Machine {
	m := &ir.Machine{Name: name, Key: str(v, "key"), Pos: b.userPos(v, "machines", name),
		States:      strList(v.LookupPath(cue.ParsePath("states"))),
		Initial:     strList(v.LookupPath(cue.ParsePath("initial"))),
		Terminal:    strList(v.LookupPath(cue.ParsePath("terminal"))),
		Transitions: map[string][]string{},
	}
	if m.Terminal == nil {
		m.Terminal = []string{}
	}
	if it, err := v.LookupPath(cue.ParsePath("transitions")).Fields(); err == nil {
		for it.Next() {
			tos := strList(it.Value())
			if tos == nil {
				tos = []string{}
			}
			m.Transitions[it.Selector().Unquoted()] = tos
		}
	}
	return m
}

func (b *builder) entry(name string, v cue.Value) *ir.Entry {
	e := &ir.Entry{Name: name, Pos: b.userPos(v, "entries", name),
		Machine: str(v, "machine"), Order: str(v, "order"), OrderScope: str(v, "order_scope"), ID: str(v, "id")}
	e.Doc = str(v, "doc")
	if n, err := v.LookupPath(cue.ParsePath("type_number")).Int64(); err == nil {
		e.Number = uint32(n)
	}
	e.Class, _ = ir.ParseClass(str(v, "class"))
	e.Keys = strList(v.LookupPath(cue.ParsePath("keys")))
	if e.Keys == nil {
		e.Keys = []string{}
	}
	to := v.LookupPath(cue.ParsePath("to"))
	if to.Exists() {
		switch to.IncompleteKind() {
		case cue.StringKind:
			e.To, _ = to.String()
		case cue.StructKind:
			if st := to.LookupPath(cue.ParsePath("state")); st.Exists() {
				e.ToState, _ = st.String()
			} else {
				e.To = str(to, "field")
				e.ToMap = map[string]string{}
				if it, err := to.LookupPath(cue.ParsePath("map")).Fields(); err == nil {
					for it.Next() {
						e.ToMap[it.Selector().Unquoted()], _ = it.Value().String()
					}
				}
			}
		}
	}
	items := v.LookupPath(cue.ParsePath("items"))
	if items.Exists() {
		e.Item = str(items, "type")
		e.ItemsField = str(items, "field")
	}
	p := v.LookupPath(cue.ParsePath("payload"))
	e.Fields = b.structFields("entries."+name+".payload", p, e)
	return e
}

// userPos is the position of a declaration in the user's files (the
// unified value may report the meta-schema's position instead).
func (b *builder) userPos(v cue.Value, section, name string) ir.Pos {
	if b.r.user.Exists() {
		if uv := b.r.user.LookupPath(cue.MakePath(cue.Str(section), cue.Str(name))); uv.Exists() && uv.Pos().IsValid() {
			return pos(uv.Pos())
		}
	}
	return pos(v.Pos())
}

// structFields translates the fields of a struct value.
func (b *builder) structFields(path string, v cue.Value, e *ir.Entry) []*ir.Field {
	if syn, ok := v.Syntax(cue.Optional(true)).(*ast.StructLit); ok {
		for _, el := range syn.Elts {
			switch x := el.(type) {
			case *ast.Field:
				if _, isPattern := x.Label.(*ast.ListLit); isPattern {
					b.unsupported(pos(v.Pos()), path, fmt.Sprintf("%s: pattern constraint %s (an open map)", path, nodeText(x.Label)),
						"declare each field explicitly; maps are not supported")
				}
			case *ast.Ellipsis:
				b.unsupported(pos(v.Pos()), path, fmt.Sprintf("%s: open struct (...)", path),
					"declare each field explicitly and remove ...")
			}
		}
	}
	fields := []*ir.Field{}
	it, err := v.Fields(cue.Optional(true))
	if err != nil {
		b.invalid(pos(v.Pos()), path, fmt.Sprintf("%s: %v", path, err), "declare a struct of fields")
		return fields
	}
	for it.Next() {
		name := it.Selector().Unquoted()
		fp := path + "." + name
		f := &ir.Field{Name: name, Optional: it.IsOptional(), Pos: pos(it.Value().Pos())}
		if cg := it.Value().Doc(); len(cg) > 0 {
			f.Doc = strings.TrimSpace(cg[0].Text())
		}
		isItems := e != nil && path == "entries."+e.Name+".payload" && name == e.ItemsField && e.Item != ""
		b.value(fp, f, it.Value(), isItems, e)
		fields = append(fields, f)
	}
	return fields
}

// value fills f's kind and constraints from v.
func (b *builder) value(path string, f *ir.Field, v cue.Value, isItems bool, e *ir.Entry) {
	k := v.IncompleteKind()
	listV := v
	if k == cue.BottomKind {
		// CUE evaluates list.MinItems against the still-open list and
		// reports it as too short; the declaration is still a list.
		if lv, ok := abstractList(v); ok {
			k, listV = cue.ListKind, lv
		}
	}
	switch k {
	case cue.StringKind:
		f.Kind = ir.KindString
	case cue.IntKind:
		f.Kind = ir.KindInt
	case cue.FloatKind:
		f.Kind = ir.KindFloat
	case cue.NumberKind:
		f.Kind = ir.KindNumber
	case cue.BoolKind:
		f.Kind = ir.KindBool
	case cue.ListKind:
		f.Kind = ir.KindList
	case cue.StructKind:
		f.Kind = ir.KindStruct
		f.Fields = b.structFields(path, v, e)
		return
	default:
		b.unsupported(f.Pos, path, fmt.Sprintf("%s: value of kind %v (a field must have exactly one of string, int, float, number, bool, list or struct)", path, k),
			"give the field a single type, e.g. string or int & >=0 & <=10")
		return
	}
	conj := conjuncts(v.Syntax())
	if len(conj) == 0 {
		b.unsupported(f.Pos, path, fmt.Sprintf("%s: cannot read the constraint", path), "simplify the field's declaration")
		return
	}
	var lo, hi *bound
	for _, c := range conj {
		if !b.conjunct(path, f, c, &lo, &hi, isItems) {
			return
		}
	}
	switch f.Kind {
	case ir.KindInt:
		b.intRange(path, f, lo, hi)
	case ir.KindFloat, ir.KindNumber:
		f.Min, f.Max = lo.irBound(), hi.irBound()
	}
	if f.Kind == ir.KindList {
		if isItems {
			f.ItemType = e.Item
			return
		}
		elem := &ir.Field{Name: f.Name + "[]", Pos: f.Pos}
		ev := listV.LookupPath(cue.MakePath(cue.AnyIndex))
		if !ev.Exists() {
			b.unsupported(f.Pos, path, fmt.Sprintf("%s: list without an element type", path), "declare the element type, e.g. [...string]")
			return
		}
		b.value(path+"[]", elem, ev, false, e)
		if elem.Kind == ir.KindList {
			b.unsupported(f.Pos, path, fmt.Sprintf("%s: list of lists", path), "use a list of structs instead")
		}
		f.Elem = elem
	}
}

// abstractList finds the list conjunct of a value whose list validators
// failed on the open list.
func abstractList(v cue.Value) (cue.Value, bool) {
	op, args := v.Expr()
	if op != cue.AndOp {
		return cue.Value{}, false
	}
	for _, a := range args {
		if a.Err() == nil && a.IncompleteKind() == cue.ListKind {
			return a, true
		}
		if lv, ok := abstractList(a); ok {
			return lv, true
		}
	}
	return cue.Value{}, false
}
