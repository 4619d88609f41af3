package runtimecat

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/writ-dev/writ/schema/ir"
	"github.com/writ-dev/writ/schema/wire"
)

// value is one decoded field value. Which members are used depends on the
// node's kind: s for strings; n for ints (int64 bits), uints, floats
// (float64 bits) and bools (0 or 1); list for a struct's members or a
// list's elements (a receipt's item is an element whose list holds the
// item's fields).
type value struct {
	s    string
	list []value
	n    uint64
	set  bool // present (always true for a required field that decoded)
}

func (v *value) int() int64     { return int64(v.n) }
func (v *value) float() float64 { return math.Float64frombits(v.n) }

// node is the compiled form of one ir.Field (or of a list's element type).
type node struct {
	name     string // field name ("" for a list element)
	kind     ir.Kind
	optional bool
	fields   []*node // struct members
	known    string  // struct: the declared member names, for unknown-field errors
	elem     *node   // list of plain values
	item     *entry  // list of payloads of another entry type
	itemName string
	// binName names the field in binary decoding errors (the dotted path
	// within the payload, without list indexes, as generated code does).
	binName string
	// check validates a decoded value; nil when the field has no
	// constraint. The error's Field is relative to this node ("" for the
	// value itself).
	check func(v *value) *ir.FieldError
}

func fieldErr(field, rule, msg string) *ir.FieldError {
	return &ir.FieldError{Field: field, Rule: rule, Msg: msg}
}

// Error paths are built from the failing value up, as package wire
// describes: "" is the value itself, wire.Member a member, wire.Index an
// element, joined by wire.Under; typed roots them at the payload.

// compiler turns ir.Fields into nodes; entries are compiled once and
// shared, so a receipt's items use the item type's own nodes.
type compiler struct {
	s        *ir.Schema
	entries  map[string]*entry
	matchers map[string]func(string) bool // by pattern
}

func (c *compiler) fields(owner string, fs []*ir.Field, binPrefix string) ([]*node, error) {
	out := make([]*node, len(fs))
	for i, f := range fs {
		bin := f.Name
		if binPrefix != "" {
			bin = binPrefix + "." + f.Name
		}
		n, err := c.field(owner, f, bin)
		if err != nil {
			return nil, err
		}
		n.name = f.Name
		n.optional = f.Optional
		out[i] = n
	}
	return out, nil
}

func knownList(fs []*node) string {
	names := make([]string, len(fs))
	for i, f := range fs {
		names[i] = f.name
	}
	return strings.Join(names, ", ")
}

func (c *compiler) field(owner string, f *ir.Field, bin string) (*node, error) {
	n := &node{kind: f.Kind, binName: bin}
	where := owner + "." + f.Name
	switch f.Kind {
	case ir.KindString:
		chk, err := c.stringCheck(f, where)
		if err != nil {
			return nil, err
		}
		n.check = chk
	case ir.KindInt, ir.KindUint, ir.KindFloat, ir.KindNumber:
		chk, err := numberCheck(f, where)
		if err != nil {
			return nil, err
		}
		n.check = chk
	case ir.KindBool:
	case ir.KindStruct:
		fs, err := c.fields(where, f.Fields, bin)
		if err != nil {
			return nil, err
		}
		n.fields = fs
		n.known = knownList(fs)
		n.check = structCheck(fs)
	case ir.KindList:
		switch {
		case f.ItemType != "":
			it, ok := c.entries[f.ItemType]
			if !ok {
				return nil, fmt.Errorf("runtimecat: %s: items of undeclared entry type %q (fix: declare it or correct the name)", where, f.ItemType)
			}
			n.item = it
			n.itemName = f.ItemType
		case f.Elem != nil:
			el, err := c.field(owner, f.Elem, bin)
			if err != nil {
				return nil, err
			}
			if f.Elem.Kind == ir.KindStruct {
				el.name = ""
			}
			n.elem = el
		default:
			return nil, fmt.Errorf("runtimecat: %s: list without an element type (fix: declare the element type)", where)
		}
		n.check = listCheck(f, n)
	default:
		return nil, fmt.Errorf("runtimecat: %s: field has no type (kind %s) (fix: give the field a type)", where, f.Kind)
	}
	if f.Optional && n.check != nil {
		inner := n.check
		n.check = func(v *value) *ir.FieldError {
			if !v.set {
				return nil
			}
			return inner(v)
		}
	}
	return n, nil
}

func (c *compiler) stringCheck(f *ir.Field, where string) (func(*value) *ir.FieldError, error) {
	var checks []func(string) *ir.FieldError
	if len(f.Enum) > 0 {
		enum := append([]string(nil), f.Enum...)
		rule := ir.EnumRule(enum)
		checks = append(checks, func(s string) *ir.FieldError {
			for _, e := range enum {
				if s == e {
					return nil
				}
			}
			return fieldErr("", rule, "must be one of "+rule+", got "+wire.Quote(s)+" (fix: use one of the listed values)")
		})
	}
	if f.MinLen != nil || f.MaxLen != nil {
		lo, hi := f.LenRange()
		rule, desc := f.LenRule("strings", "Runes"), f.LenDesc()
		checks = append(checks, func(s string) *ir.FieldError {
			if n := utf8.RuneCountInString(s); n < lo || n > hi {
				return fieldErr("", rule, fmt.Sprintf("must have %s characters, has %d (fix: shorten or lengthen the value)", desc, n))
			}
			return nil
		})
	}
	for _, p := range f.Patterns {
		match, err := c.matcher(p)
		if err != nil {
			return nil, fmt.Errorf("runtimecat: %s: pattern %q: %w (fix: write an RE2 expression)", where, p, err)
		}
		rule := "=~" + strconv.Quote(p)
		pat := p
		checks = append(checks, func(s string) *ir.FieldError {
			if match(s) {
				return nil
			}
			return fieldErr("", rule, "must match the pattern "+pat+", got "+wire.Quote(s)+" (fix: change the value to match)")
		})
	}
	switch len(checks) {
	case 0:
		return nil, nil
	case 1:
		chk := checks[0]
		return func(v *value) *ir.FieldError { return chk(v.s) }, nil
	}
	return func(v *value) *ir.FieldError {
		for _, chk := range checks {
			if fe := chk(v.s); fe != nil {
				return fe
			}
		}
		return nil
	}, nil
}

// matcher decides a pattern as generated code does: by a DFA when the
// pattern compiles to one (anchored, ASCII-only), else by regexp.
func (c *compiler) matcher(p string) (func(string) bool, error) {
	if m, ok := c.matchers[p]; ok {
		return m, nil
	}
	var m func(string) bool
	if d, ok := compilePattern(p); ok {
		m = d.Match
	} else {
		re, err := regexp.Compile(p)
		if err != nil {
			return nil, err
		}
		m = re.MatchString
	}
	c.matchers[p] = m
	return m, nil
}

// bound is one compiled end of a numeric range.
type bound struct {
	op   string // ">", ">=", "<" or "<="
	rule string
	head string // "must be >= 1, got "
	i    int64
	u    uint64
	f    float64
}

// breaks reports whether a value comparing c (-1 below, 0 equal, +1 above)
// with the bound violates it.
func (b *bound) breaks(c int) bool {
	switch b.op {
	case ">":
		return c <= 0
	case ">=":
		return c < 0
	case "<":
		return c >= 0
	}
	return c > 0
}

const rangeFix = " (fix: send a value in range)"

func numberCheck(f *ir.Field, where string) (func(*value) *ir.FieldError, error) {
	var bs []bound
	for bd, lower := range f.Bounds() {
		op := bd.Op(lower)
		b := bound{op: op, rule: op + bd.Value, head: "must be " + op + " " + bd.Value + ", got "}
		var err error
		switch f.Kind {
		case ir.KindInt:
			if b.i, err = strconv.ParseInt(bd.Value, 10, 64); err != nil {
				return nil, fmt.Errorf("runtimecat: %s: bound %s is not an int64: %w (fix: use an integer bound in range)", where, b.rule, err)
			}
		case ir.KindUint:
			if b.u, err = strconv.ParseUint(bd.Value, 10, 64); err != nil {
				return nil, fmt.Errorf("runtimecat: %s: bound %s is not a uint64: %w (fix: use a non-negative integer bound in range)", where, b.rule, err)
			}
		default:
			if b.f, err = strconv.ParseFloat(bd.Value, 64); err != nil {
				return nil, fmt.Errorf("runtimecat: %s: bound %s is not a number: %w (fix: use a decimal bound)", where, b.rule, err)
			}
		}
		bs = append(bs, b)
	}
	switch f.Kind {
	case ir.KindInt:
		if len(bs) == 0 {
			return nil, nil
		}
		return func(v *value) *ir.FieldError {
			x := v.int()
			for i := range bs {
				if bs[i].breaks(cmp3(x, bs[i].i)) {
					return fieldErr("", bs[i].rule, bs[i].head+strconv.FormatInt(x, 10)+rangeFix)
				}
			}
			return nil
		}, nil
	case ir.KindUint:
		if len(bs) == 0 {
			return nil, nil
		}
		return func(v *value) *ir.FieldError {
			for i := range bs {
				if bs[i].breaks(cmp3(v.n, bs[i].u)) {
					return fieldErr("", bs[i].rule, bs[i].head+strconv.FormatUint(v.n, 10)+rangeFix)
				}
			}
			return nil
		}, nil
	}
	// Floats and numbers are always checked for being finite.
	return func(v *value) *ir.FieldError {
		x := v.float()
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return fieldErr("", "number", "must be a finite number (fix: send a finite number)")
		}
		for i := range bs {
			if bs[i].breaks(cmp3(x, bs[i].f)) {
				return fieldErr("", bs[i].rule, bs[i].head+fmt.Sprintf("%g", x)+rangeFix)
			}
		}
		return nil
	}, nil
}

func cmp3[T int64 | uint64 | float64](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func structCheck(fs []*node) func(*value) *ir.FieldError {
	has := false
	for _, f := range fs {
		has = has || f.check != nil
	}
	if !has {
		return nil
	}
	return func(v *value) *ir.FieldError {
		return checkFields(fs, v.list)
	}
}

// checkFields validates a struct's members in declaration order.
func checkFields(fs []*node, vals []value) *ir.FieldError {
	for i, f := range fs {
		if f.check == nil {
			continue
		}
		if fe := f.check(&vals[i]); fe != nil {
			return wire.Under(wire.Member(f.name), fe)
		}
	}
	return nil
}

func listCheck(f *ir.Field, n *node) func(*value) *ir.FieldError {
	var checks []func(*value) *ir.FieldError
	if f.MinLen != nil || f.MaxLen != nil {
		lo, hi := f.LenRange()
		rule, desc := f.LenRule("list", "Items"), f.LenDesc()
		checks = append(checks, func(v *value) *ir.FieldError {
			if l := len(v.list); l < lo || l > hi {
				return fieldErr("", rule, fmt.Sprintf("must have %s items, has %d (fix: send fewer or more items)", desc, l))
			}
			return nil
		})
	}
	switch {
	case n.item != nil:
		it := n.item
		checks = append(checks, func(v *value) *ir.FieldError {
			for i := range v.list {
				if fe := checkFields(it.fields, v.list[i].list); fe != nil {
					return wire.Under(wire.Index(i), fe)
				}
			}
			return nil
		})
	case n.elem.check != nil:
		el := n.elem
		checks = append(checks, func(v *value) *ir.FieldError {
			for i := range v.list {
				if fe := el.check(&v.list[i]); fe != nil {
					return wire.Under(wire.Index(i), fe)
				}
			}
			return nil
		})
	}
	if len(checks) == 0 {
		return nil
	}
	return func(v *value) *ir.FieldError {
		for _, chk := range checks {
			if fe := chk(v); fe != nil {
				return fe
			}
		}
		return nil
	}
}
