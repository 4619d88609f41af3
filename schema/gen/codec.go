package gen

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"

	"github.com/writ-dev/writ/schema/ir"
)

// The generated payload codecs: the binary encoding (appendField,
// decodeField) and the JSON decoder (emitDecodeJSON).

// appendField emits the binary encoding of one field.
func (g *generator) appendField(b *bytes.Buffer, owner string, f *ir.Field, val string, depth int) {
	if f.Optional {
		fmt.Fprintf(b, "\tif %s != nil {\n\tb = append(b, 1)\n", val)
		if f.Kind != ir.KindList && f.Kind != ir.KindStruct {
			val = "*" + val
		}
		c := *f
		c.Optional = false
		g.appendField(b, owner, &c, val, depth)
		b.WriteString("\t} else {\n\tb = append(b, 0)\n\t}\n")
		return
	}
	switch f.Kind {
	case ir.KindString:
		fmt.Fprintf(b, "\tb = wire.AppendString(b, %s)\n", val)
	case ir.KindInt:
		fmt.Fprintf(b, "\tb = wire.AppendInt(b, %s)\n", val)
	case ir.KindUint:
		fmt.Fprintf(b, "\tb = wire.AppendUint(b, %s)\n", val)
	case ir.KindFloat, ir.KindNumber:
		fmt.Fprintf(b, "\tb = wire.AppendFloat(b, %s)\n", val)
	case ir.KindBool:
		fmt.Fprintf(b, "\tb = wire.AppendBool(b, %s)\n", val)
	case ir.KindStruct:
		for _, sf := range f.Fields {
			g.appendField(b, owner+goName(f.Name), sf, val+"."+fieldName(sf.Name), depth+1)
		}
	case ir.KindList:
		i := fmt.Sprintf("i%d", depth)
		fmt.Fprintf(b, "\tb = wire.AppendUint(b, uint64(len(%s)))\n\tfor %s := range %s {\n", val, i, val)
		if f.ItemType != "" {
			fmt.Fprintf(b, "\tb = %s[%s].appendTo(b)\n", val, i)
		} else {
			g.appendField(b, owner, f.Elem, val+"["+i+"]", depth+1)
		}
		b.WriteString("\t}\n")
	}
}

// decodeField emits the binary decoding of one field into dst.
func (g *generator) decodeField(b *bytes.Buffer, owner string, f *ir.Field, dst, name string, depth int) {
	nq := strconv.Quote(name)
	if f.Optional {
		fmt.Fprintf(b, "\tif d.Bool(%s) {\n", nq)
		c := *f
		c.Optional = false
		switch f.Kind {
		case ir.KindList:
			g.decodeField(b, owner, &c, dst, name, depth)
		case ir.KindStruct:
			fmt.Fprintf(b, "\t%s = new(%s)\n", dst, g.goType(owner, f))
			g.decodeField(b, owner, &c, dst, name, depth)
		default:
			v := fmt.Sprintf("v%d", depth)
			fmt.Fprintf(b, "\t%s := %s\n\t%s = &%s\n", v, g.readExpr(f.Kind, nq), dst, v)
		}
		b.WriteString("\t}\n")
		return
	}
	switch f.Kind {
	case ir.KindStruct:
		for _, sf := range f.Fields {
			g.decodeField(b, owner+goName(f.Name), sf, dst+"."+fieldName(sf.Name), name+"."+sf.Name, depth+1)
		}
	case ir.KindList:
		i := fmt.Sprintf("i%d", depth)
		fmt.Fprintf(b, "\t%s = make(%s, d.Count(%s))\n\tfor %s := range %s {\n", dst, g.goType(owner, f), nq, i, dst)
		if f.ItemType != "" {
			fmt.Fprintf(b, "\t%s[%s].decodeBinary(d)\n", dst, i)
		} else {
			g.decodeField(b, owner, f.Elem, dst+"["+i+"]", name, depth+1)
		}
		b.WriteString("\t}\n")
	default:
		fmt.Fprintf(b, "\t%s = %s\n", dst, g.readExpr(f.Kind, nq))
	}
}

func (g *generator) readExpr(k ir.Kind, nq string) string {
	switch k {
	case ir.KindString:
		return "d.Str(" + nq + ")"
	case ir.KindInt:
		return "d.Int(" + nq + ")"
	case ir.KindUint:
		return "d.Uint(" + nq + ")"
	case ir.KindFloat, ir.KindNumber:
		return "d.Float(" + nq + ")"
	case ir.KindBool:
		return "d.Bool(" + nq + ")"
	}
	return "nil"
}

// emitDecodeJSON emits the JSON decoder of a struct type: it reads a JSON
// object (checked by wire.Document or wire.Object) and returns errors with
// paths relative to it (see package wire).
func (g *generator) emitDecodeJSON(b *bytes.Buffer, name string, fields []*ir.Field) {
	names := make([]string, len(fields))
	for i, f := range fields {
		names[i] = f.Name
	}
	fmt.Fprintf(b, "const known%s = %q\n\n", name, strings.Join(names, ", "))
	fmt.Fprintf(b, "func (p *%s) decodeJSON(data []byte) *ir.FieldError {\n", name)
	if len(fields) > 0 {
		fmt.Fprintf(b, "\tvar seen [%d]bool\n", len(fields))
	}
	b.WriteString("\tm := wire.MembersOf(data)\n\tfor m.Next() {\n")
	if len(fields) > 0 {
		b.WriteString("\t\tkey, val := m.Key(), m.Value()\n")
	} else {
		b.WriteString("\t\tkey := m.Key()\n")
	}
	b.WriteString("\t\tswitch string(key) {\n")
	for i, f := range fields {
		fmt.Fprintf(b, "\t\tcase %q:\n\t\t\tif seen[%d] {\n\t\t\t\treturn wire.DuplicateField(string(key))\n\t\t\t}\n\t\t\tseen[%d] = true\n", f.Name, i, i)
		g.jsonField(b, name, f, "p."+fieldName(f.Name), fmt.Sprintf("wire.Member(%q)", f.Name), 0)
	}
	fmt.Fprintf(b, "\t\tdefault:\n\t\t\treturn wire.UnknownField(string(key), known%s)\n\t\t}\n\t}\n\tif err := m.Err(); err != nil {\n\t\treturn err\n\t}\n", name)
	for i, f := range fields {
		if !f.Optional {
			fmt.Fprintf(b, "\tif !seen[%d] {\n\t\treturn wire.MissingField(%q)\n\t}\n", i, f.Name)
		}
	}
	b.WriteString("\treturn nil\n}\n\n")
}

// jsonField emits the decoding of a JSON value into dst. step is a Go
// expression of the value's path step within the object being decoded
// (evaluated on failure only).
func (g *generator) jsonField(b *bytes.Buffer, owner string, f *ir.Field, dst, step string, depth int) {
	v := fmt.Sprintf("v%d", depth)
	set := func() {
		if f.Optional {
			fmt.Fprintf(b, "\t%s = &%s\n", dst, v)
		} else {
			fmt.Fprintf(b, "\t%s = %s\n", dst, v)
		}
	}
	valVar := "val"
	if depth > 0 {
		valVar = fmt.Sprintf("ev%d", depth-1)
	}
	fail := fmt.Sprintf("\tif err != nil {\n\t\treturn wire.Under(%s, err)\n\t}\n", step)
	switch f.Kind {
	case ir.KindString, ir.KindInt, ir.KindUint, ir.KindBool:
		fn := map[ir.Kind]string{ir.KindString: "String", ir.KindInt: "Int", ir.KindUint: "Uint", ir.KindBool: "Bool"}[f.Kind]
		fmt.Fprintf(b, "\t%s, err := wire.%s(%s)\n%s", v, fn, valVar, fail)
		set()
	case ir.KindFloat, ir.KindNumber:
		fmt.Fprintf(b, "\t%s, err := wire.Float(%s, %v)\n%s", v, valVar, f.Kind == ir.KindFloat, fail)
		set()
	case ir.KindStruct:
		st := owner + goName(f.Name)
		g.jsonObject(b, v, st, valVar, step)
		set()
	case ir.KindList:
		elems := fmt.Sprintf("elems%d", depth)
		i := fmt.Sprintf("i%d", depth)
		ev := fmt.Sprintf("ev%d", depth)
		fmt.Fprintf(b, "\t%s, err := wire.List(%s)\n%s", elems, valVar, fail)
		fmt.Fprintf(b, "\t%s := make(%s, len(%s))\n\tfor %s, %s := range %s {\n", v, g.goType(owner, f), elems, i, ev, elems)
		elemStep := fmt.Sprintf("%s+wire.Index(%s)", step, i)
		if f.ItemType != "" || f.Elem.Kind == ir.KindStruct {
			g.jsonObject(b, v+"["+i+"]", "", ev, elemStep)
		} else {
			c := *f.Elem
			c.Optional = false
			g.jsonField(b, owner, &c, v+"["+i+"]", elemStep, depth+1)
		}
		b.WriteString("\t}\n")
		fmt.Fprintf(b, "\t%s = %s\n", dst, v)
	}
}

// jsonObject emits the decoding of the JSON object in valVar into dst,
// declared as a variable of type typ unless typ is "".
func (g *generator) jsonObject(b *bytes.Buffer, dst, typ, valVar, step string) {
	fmt.Fprintf(b, "\tif err := wire.Object(%s); err != nil {\n\t\treturn wire.Under(%s, err)\n\t}\n", valVar, step)
	if typ != "" {
		fmt.Fprintf(b, "\tvar %s %s\n", dst, typ)
	}
	fmt.Fprintf(b, "\tif err := %s.decodeJSON(%s); err != nil {\n\t\treturn wire.Under(%s, err)\n\t}\n", dst, valVar, step)
}
