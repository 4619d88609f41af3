package gen

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"

	"github.com/writ-dev/writ/schema/ir"
)

func (g *generator) payloads(b *bytes.Buffer) {
	var body bytes.Buffer
	for _, e := range g.s.Entries {
		g.entry(&body, e)
	}
	g.header(b, irPkg, wirePkg, "math", "fmt", "regexp", "strconv", "unicode/utf8")
	b.WriteString("var (\n\t_ = math.IsNaN\n\t_ = fmt.Sprintf\n\t_ = utf8.RuneCountInString\n\t_ = strconv.Itoa\n\t_ = regexp.MustCompile\n)\n\n")
	var res []string
	for _, p := range g.reOrder {
		if _, ok := g.dfas[p]; !ok {
			res = append(res, p)
		}
	}
	if len(res) > 0 {
		b.WriteString("// Compiled patterns (RE2, unanchored, as in CUE's =~).\nvar (\n")
		for _, p := range res {
			fmt.Fprintf(b, "\t%s = regexp.MustCompile(%s)\n", g.regexps[p], goQuote(p))
		}
		b.WriteString(")\n\n")
	}
	for _, p := range g.reOrder {
		if d, ok := g.dfas[p]; ok {
			n := g.regexps[p]
			emitMatcher(b, "match"+strings.ToUpper(n[:1])+n[1:], n, p, d)
		}
	}
	b.Write(body.Bytes())
}

func goQuote(s string) string {
	if !strings.Contains(s, "`") && strconv.CanBackquote(s) {
		return "`" + s + "`"
	}
	return strconv.Quote(s)
}

// matcher returns the Go function expression that reports whether a string
// matches p: a generated DFA matcher when compilePattern takes p, else the
// MatchString method of a compiled regexp.
func (g *generator) matcher(p string) string {
	n, ok := g.regexps[p]
	if !ok {
		n = fmt.Sprintf("pattern%d", len(g.reOrder))
		g.regexps[p] = n
		g.reOrder = append(g.reOrder, p)
		if d, ok := compilePattern(p); ok {
			g.dfas[p] = d
		}
	}
	if _, ok := g.dfas[p]; ok {
		return "match" + strings.ToUpper(n[:1]) + n[1:]
	}
	return n + ".MatchString"
}

// goType is the Go type of a field (ignoring optionality).
func (g *generator) goType(owner string, f *ir.Field) string {
	switch f.Kind {
	case ir.KindString:
		return "string"
	case ir.KindInt:
		return "int64"
	case ir.KindUint:
		return "uint64"
	case ir.KindFloat, ir.KindNumber:
		return "float64"
	case ir.KindBool:
		return "bool"
	case ir.KindStruct:
		return owner + goName(f.Name)
	case ir.KindList:
		if f.ItemType != "" {
			return "[]" + goName(f.ItemType)
		}
		if f.Elem.Kind == ir.KindStruct {
			return "[]" + owner + goName(f.Name) + "Item"
		}
		return "[]" + g.goType(owner, f.Elem)
	}
	return "any"
}

func (g *generator) fieldType(owner string, f *ir.Field) string {
	t := g.goType(owner, f)
	if f.Optional && f.Kind != ir.KindList {
		return "*" + t
	}
	return t
}

func comment(b *bytes.Buffer, indent, text string) {
	for _, l := range strings.Split(strings.TrimSpace(text), "\n") {
		fmt.Fprintf(b, "%s// %s\n", indent, strings.TrimSpace(l))
	}
}

func describe(f *ir.Field) string {
	var parts []string
	if f.Optional {
		parts = append(parts, "optional")
	} else {
		parts = append(parts, "required")
	}
	parts = append(parts, f.Kind.String())
	if len(f.Enum) > 0 {
		parts = append(parts, "one of "+ir.EnumRule(f.Enum))
	}
	for _, p := range f.Patterns {
		parts = append(parts, "=~"+strconv.Quote(p))
	}
	if f.MinLen != nil {
		parts = append(parts, fmt.Sprintf("min length %d", *f.MinLen))
	}
	if f.MaxLen != nil {
		parts = append(parts, fmt.Sprintf("max length %d", *f.MaxLen))
	}
	if f.Min != nil {
		parts = append(parts, f.Min.Op(true)+f.Min.Value)
	}
	if f.Max != nil {
		parts = append(parts, f.Max.Op(false)+f.Max.Value)
	}
	if f.ItemType != "" {
		parts = append(parts, "items of "+f.ItemType)
	}
	return strings.Join(parts, ", ")
}

// emitStruct declares a struct type and, recursively, its nested types.
func (g *generator) emitStruct(b *bytes.Buffer, name, doc string, fields []*ir.Field) {
	if doc != "" {
		comment(b, "", doc)
	}
	fmt.Fprintf(b, "type %s struct {\n", name)
	for _, f := range fields {
		comment(b, "\t", strings.TrimSpace(f.Doc+"\n"+describe(f)))
		tag := f.Name
		if f.Optional {
			tag += ",omitempty"
		}
		fmt.Fprintf(b, "\t%s %s `json:%q`\n", fieldName(f.Name), g.fieldType(name, f), tag)
	}
	b.WriteString("}\n\n")
	for _, f := range fields {
		if f.Kind == ir.KindStruct {
			sub := name + goName(f.Name)
			g.emitStruct(b, sub, fmt.Sprintf("%s is the %s field of %s.", sub, f.Name, name), f.Fields)
		}
		if f.Kind == ir.KindList && f.Elem != nil && f.Elem.Kind == ir.KindStruct {
			sub := name + goName(f.Name) + "Item"
			g.emitStruct(b, sub, fmt.Sprintf("%s is one element of the %s field of %s.", sub, f.Name, name), f.Elem.Fields)
		}
	}
	g.emitDecodeJSON(b, name, fields)
}

func (g *generator) entry(b *bytes.Buffer, e *ir.Entry) {
	t := goName(e.Name)
	doc := fmt.Sprintf("%s is the payload of entry type %q (class %s, type number %d).", t, e.Name, e.Class, e.Number)
	if e.Doc != "" {
		doc += "\n" + e.Doc
	}
	g.emitStruct(b, t, doc, e.Fields)
	fmt.Fprintf(b, "var _ ir.Payload = (*%s)(nil)\n\n", t)
	fmt.Fprintf(b, "// EntryType returns %q.\nfunc (p *%s) EntryType() string { return Name%s }\n\n", e.Name, t, t)

	// Validate.
	fmt.Fprintf(b, "// Validate checks every constraint the schema declares for %s.\nfunc (p *%s) Validate() error {\n", e.Name, t)
	for _, f := range e.Fields {
		g.validate(b, "Name"+t, t, f, "p."+fieldName(f.Name), strconv.Quote(f.Name), 0)
	}
	b.WriteString("\treturn nil\n}\n\n")

	// Binary.
	fmt.Fprintf(b, "// AppendBinary appends the stable binary encoding of the payload.\nfunc (p *%s) AppendBinary(b []byte) ([]byte, error) {\n\treturn p.appendTo(b), nil\n}\n\n", t)
	fmt.Fprintf(b, "func (p *%s) appendTo(b []byte) []byte {\n", t)
	for _, f := range e.Fields {
		g.appendField(b, t, f, "p."+fieldName(f.Name), 0)
	}
	b.WriteString("\treturn b\n}\n\n")
	fmt.Fprintf(b, "func (p *%s) decodeBinary(d *wire.Decoder) {\n", t)
	for _, f := range e.Fields {
		g.decodeField(b, t, f, "p."+fieldName(f.Name), f.Name, 0)
	}
	b.WriteString("}\n\n")
	fmt.Fprintf(b, `func parseBinary%[1]s(data []byte) (ir.Payload, error) {
	p := new(%[1]s)
	d := wire.NewDecoder(Name%[1]s, data)
	p.decodeBinary(&d)
	if err := d.Finish(); err != nil {
		return nil, err
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return p, nil
}

func parseJSON%[1]s(data []byte) (ir.Payload, error) {
	if err := wire.Document(data); err != nil {
		return nil, wire.Root(Name%[1]s, err)
	}
	p := new(%[1]s)
	if err := p.decodeJSON(data); err != nil {
		return nil, wire.Root(Name%[1]s, err)
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return p, nil
}

`, t)

	// Routing accessors.
	fmt.Fprintf(b, "// Keys renders the key templates %v.\nfunc (p *%s) Keys() []string {\n\treturn []string{", e.Keys, t)
	for i, k := range e.Keys {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(g.keyExpr(e, k))
	}
	b.WriteString("}\n}\n\n")
	key := `""`
	if m, ok := g.s.Machine(e.Machine); ok {
		key = "p." + fieldName(m.Key)
	}
	fmt.Fprintf(b, "// InstanceKey is the machine key of the payload.\nfunc (p *%s) InstanceKey() string { return %s }\n\n", t, key)
	fmt.Fprintf(b, "// TargetState is the state the entry moves its instance to (\"\" for none).\nfunc (p *%s) TargetState() string {\n", t)
	switch {
	case e.ToState != "":
		fmt.Fprintf(b, "\treturn %q\n", e.ToState)
	case e.ToMap != nil:
		fmt.Fprintf(b, "\tswitch p.%s {\n", fieldName(e.To))
		f, _ := e.Field(e.To)
		for _, v := range f.Enum {
			if st, ok := e.ToMap[v]; ok {
				fmt.Fprintf(b, "\tcase %q:\n\t\treturn %q\n", v, st)
			}
		}
		b.WriteString("\t}\n\treturn \"\"\n")
	case e.To != "":
		fmt.Fprintf(b, "\treturn p.%s\n", fieldName(e.To))
	default:
		b.WriteString("\treturn \"\"\n")
	}
	b.WriteString("}\n\n")
	fmt.Fprintf(b, "// Order is the per-instance order of the payload (ok=false for none).\nfunc (p *%s) Order() (uint64, bool) {\n", t)
	if f, ok := e.Field(e.Order); ok && e.Order != "" {
		v := "p." + fieldName(f.Name)
		if f.Optional {
			fmt.Fprintf(b, "\tif %s == nil {\n\t\treturn 0, false\n\t}\n", v)
			v = "*" + v
		}
		if f.Kind == ir.KindInt {
			fmt.Fprintf(b, "\tif %s < 0 {\n\t\treturn 0, false\n\t}\n\treturn uint64(%s), true\n", v, v)
		} else {
			fmt.Fprintf(b, "\treturn %s, true\n", v)
		}
	} else {
		b.WriteString("\treturn 0, false\n")
	}
	b.WriteString("}\n\n")
	if e.OrderScope != "" {
		f, _ := e.Field(e.OrderScope)
		v := "p." + fieldName(e.OrderScope)
		if f != nil {
			switch f.Kind {
			case ir.KindInt:
				v = "strconv.FormatInt(" + v + ", 10)"
			case ir.KindUint:
				v = "strconv.FormatUint(" + v + ", 10)"
			}
		}
		fmt.Fprintf(b, "// OrderScope is the value of the payload's order_scope field (ir.OrderScoper).\nfunc (p *%s) OrderScope() string { return %s }\n\n", t, v)
	}
	id := `""`
	if e.ID != "" {
		id = "p." + fieldName(e.ID)
	}
	fmt.Fprintf(b, "// IdempotencyKey is the value of the payload's id field (\"\" for none).\nfunc (p *%s) IdempotencyKey() string { return %s }\n\n", t, id)
	fmt.Fprintf(b, "// Items returns the carried items (nil unless the type is a receipt).\nfunc (p *%s) Items() []ir.Payload {\n", t)
	if e.Item != "" {
		fn := "p." + fieldName(e.ItemsField)
		fmt.Fprintf(b, "\tout := make([]ir.Payload, len(%s))\n\tfor i := range %s {\n\t\tout[i] = &%s[i]\n\t}\n\treturn out\n", fn, fn, fn)
	} else {
		b.WriteString("\treturn nil\n")
	}
	b.WriteString("}\n\n")
}

func (g *generator) keyExpr(e *ir.Entry, tmpl string) string {
	var parts []string
	rest := tmpl
	for rest != "" {
		i := strings.IndexByte(rest, '{')
		if i < 0 {
			parts = append(parts, strconv.Quote(rest))
			break
		}
		if i > 0 {
			parts = append(parts, strconv.Quote(rest[:i]))
		}
		j := strings.IndexByte(rest, '}')
		name := rest[i+1 : j]
		f, _ := e.Field(name)
		v := "p." + fieldName(name)
		switch f.Kind {
		case ir.KindInt:
			v = "strconv.FormatInt(" + v + ", 10)"
		case ir.KindUint:
			v = "strconv.FormatUint(" + v + ", 10)"
		}
		parts = append(parts, v)
		rest = rest[j+1:]
	}
	if len(parts) == 0 {
		return `""`
	}
	return strings.Join(parts, " + ")
}

// lenCheck emits the check of a length (the Go expression n) against f's
// length bounds, if it has any; noun and fix complete the message.
func lenCheck(b *bytes.Buffer, f *ir.Field, n, pkg, what, noun, fix string, fail func(rule, msgExpr string)) {
	if f.MinLen == nil && f.MaxLen == nil {
		return
	}
	var conds []string
	if f.MinLen != nil {
		conds = append(conds, fmt.Sprintf("n < %d", *f.MinLen))
	}
	if f.MaxLen != nil {
		conds = append(conds, fmt.Sprintf("n > %d", *f.MaxLen))
	}
	fmt.Fprintf(b, "\tif n := %s; %s {\n", n, strings.Join(conds, " || "))
	fail(f.LenRule(pkg, what), fmt.Sprintf(`fmt.Sprintf("must have %s %s, has %%d (fix: %s)", n)`, f.LenDesc(), noun, fix))
	b.WriteString("\t}\n")
}

// validate emits the checks of one field. val is the Go expression of the
// value, path a Go expression of its dotted name (evaluated on failure only).
func (g *generator) validate(b *bytes.Buffer, typ, owner string, f *ir.Field, val, path string, depth int) {
	if !hasChecks(f) {
		return
	}
	if f.Optional {
		fmt.Fprintf(b, "\tif %s != nil {\n", val)
		defer b.WriteString("\t}\n")
		if f.Kind != ir.KindList && f.Kind != ir.KindStruct {
			v := fmt.Sprintf("v%d", depth)
			fmt.Fprintf(b, "\t%s := *%s\n", v, val)
			val = v
		}
	}
	fail := func(rule, msgExpr string) {
		fmt.Fprintf(b, "\t\treturn wire.Invalid(%s, %s, %s, %s)\n", typ, path, strconv.Quote(rule), msgExpr)
	}
	switch f.Kind {
	case ir.KindString:
		if len(f.Enum) > 0 {
			conds := make([]string, len(f.Enum))
			for i, v := range f.Enum {
				conds[i] = fmt.Sprintf("%s != %q", val, v)
			}
			rule := ir.EnumRule(f.Enum)
			fmt.Fprintf(b, "\tif %s {\n", strings.Join(conds, " && "))
			fail(rule, fmt.Sprintf(`"must be one of %s, got " + wire.Quote(%s) + " (fix: use one of the listed values)"`, escapeInner(rule), val))
			b.WriteString("\t}\n")
		}
		lenCheck(b, f, fmt.Sprintf("utf8.RuneCountInString(%s)", val), "strings", "Runes", "characters", "shorten or lengthen the value", fail)
		for _, p := range f.Patterns {
			fmt.Fprintf(b, "\tif !%s(%s) {\n", g.matcher(p), val)
			fail("=~"+strconv.Quote(p), fmt.Sprintf(`"must match the pattern %s, got " + wire.Quote(%s) + " (fix: change the value to match)"`, escapeInner(p), val))
			b.WriteString("\t}\n")
		}
	case ir.KindInt, ir.KindUint, ir.KindFloat, ir.KindNumber:
		if f.Kind == ir.KindFloat || f.Kind == ir.KindNumber {
			fmt.Fprintf(b, "\tif math.IsNaN(%s) || math.IsInf(%s, 0) {\n", val, val)
			fail("number", `"must be a finite number (fix: send a finite number)"`)
			b.WriteString("\t}\n")
		}
		verb := "%d"
		if f.Kind == ir.KindFloat || f.Kind == ir.KindNumber {
			verb = "%g"
		}
		for bd, lower := range f.Bounds() {
			op := bd.Op(lower)
			neg := map[string]string{">": "<=", ">=": "<", "<": ">=", "<=": ">"}[op]
			fmt.Fprintf(b, "\tif %s %s %s {\n", val, neg, numLit(f.Kind, bd.Value))
			fail(op+bd.Value, fmt.Sprintf(`fmt.Sprintf("must be %s %s, got %s (fix: send a value in range)", %s)`, op, bd.Value, verb, val))
			b.WriteString("\t}\n")
		}
	case ir.KindBool:
	case ir.KindStruct:
		for _, sf := range f.Fields {
			g.validate(b, typ, owner+goName(f.Name), sf, val+"."+fieldName(sf.Name), fmt.Sprintf("%s + %q", path, "."+sf.Name), depth+1)
		}
	case ir.KindList:
		lenCheck(b, f, fmt.Sprintf("len(%s)", val), "list", "Items", "items", "send fewer or more items", fail)
		i := fmt.Sprintf("i%d", depth)
		if f.ItemType != "" {
			fmt.Fprintf(b, "\tfor %s := range %s {\n\t\tif err := %s[%s].Validate(); err != nil {\n\t\t\treturn wire.Nest(%s, %s + wire.Index(%s), err)\n\t\t}\n\t}\n", i, val, val, i, typ, path, i)
			return
		}
		ev := fmt.Sprintf("e%d", depth)
		if f.Elem.Kind == ir.KindStruct {
			fmt.Fprintf(b, "\tfor %s := range %s {\n\t%s := &%s[%s]\n", i, val, ev, val, i)
		} else {
			fmt.Fprintf(b, "\tfor %s, %s := range %s {\n", i, ev, val)
		}
		g.validate(b, typ, owner, f.Elem, ev, fmt.Sprintf("%s + wire.Index(%s)", path, i), depth+1)
		fmt.Fprintf(b, "\t\t_ = %s\n\t}\n", ev)
	}
}

// hasChecks reports whether Validate needs any code for f.
func hasChecks(f *ir.Field) bool {
	switch f.Kind {
	case ir.KindString:
		return len(f.Enum) > 0 || len(f.Patterns) > 0 || f.MinLen != nil || f.MaxLen != nil
	case ir.KindInt, ir.KindUint:
		return f.Min != nil || f.Max != nil
	case ir.KindFloat, ir.KindNumber:
		return true
	case ir.KindStruct:
		for _, sf := range f.Fields {
			if hasChecks(sf) {
				return true
			}
		}
	case ir.KindList:
		return f.MinLen != nil || f.MaxLen != nil || f.ItemType != "" || (f.Elem != nil && hasChecks(f.Elem))
	}
	return false
}

// reserved are the ir.Payload method names a field may not take.
var reserved = map[string]bool{"EntryType": true, "Validate": true, "AppendBinary": true, "Keys": true,
	"InstanceKey": true, "TargetState": true, "Order": true, "OrderScope": true, "IdempotencyKey": true, "Items": true}

// fieldName is the Go name of a payload field: goName, with "Field"
// appended when it would collide with an ir.Payload method.
func fieldName(name string) string {
	n := goName(name)
	if reserved[n] {
		n += "Field"
	}
	return n
}

func escapeInner(s string) string {
	q := strconv.Quote(s)
	return q[1 : len(q)-1]
}

func numLit(k ir.Kind, v string) string {
	if k == ir.KindFloat || k == ir.KindNumber {
		if !strings.ContainsAny(v, ".eE") {
			return v + ".0"
		}
	}
	return v
}
