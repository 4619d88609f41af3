package node

import (
	"fmt"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/schema/ir"
)

// classVerb is the RPC and writctl command that sends an entry of a class.
var classVerb = map[ir.Class][2]string{
	ir.ClassRequest: {"Submit", "submit"},
	ir.ClassFact:    {"Report", "report"},
	ir.ClassReceipt: {"Deliver", "deliver"},
	ir.ClassConfig:  {"ConfigUpgrade", "config upgrade --type"},
}

// wrongClass refuses an entry sent with the RPC of another class before its
// payload is validated: a request reported as a fact is told to use Submit,
// not that a field the fact rules look for is missing. Undeclared types
// and the right class pass (the pipeline validates them).
func (n *Node) wrongClass(typ string, want ir.Class) *api.Error {
	d, ok := n.cat.Type(typ)
	if !ok || d.Class == want || !d.Class.Valid() {
		return nil
	}
	v, ok := classVerb[d.Class]
	if !ok {
		return nil
	}
	return &api.Error{Outcome: api.Rejected, Field: "type", Reason: fmt.Sprintf(
		"%s is a %s type, not a %s: send it with %s (writctl %s %s …)", typ, d.Class, want, v[0], v[1], typ)}
}

// isClass reports whether typ is declared with one of classes.
func (n *Node) isClass(typ string, classes ...ir.Class) bool {
	d, ok := n.cat.Type(typ)
	if !ok {
		return false
	}
	for _, c := range classes {
		if d.Class == c {
			return true
		}
	}
	return false
}
