package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/writ-dev/writ/pipeline"
	"github.com/writ-dev/writ/schema/ir"
)

func init() {
	register(&Check{ID: "property.strict-unclassified", Tier: TierProperty, Invariants: []string{"W6"},
		Title: "an unclassified type reaching the pipeline panics in strict builds and is retained as a fact otherwise", Run: checkStrictUnclassified})
}

// skewed is the generated catalog as a node of another schema version
// would see it: one declared type lost its class (version skew).
type skewed struct {
	ir.Catalog
	name string
}

func (s skewed) Type(name string) (*ir.TypeDesc, bool) {
	td, ok := s.Catalog.Type(name)
	if ok && name == s.name {
		c := *td
		c.Class = ir.ClassUnknown
		return &c, true
	}
	return td, ok
}

func checkStrictUnclassified(ctx context.Context, e *Env) Outcome {
	if r, ok := e.needCatalog(); !ok {
		return notRun("%s", r)
	}
	var en *ir.Entry
	for _, x := range e.entries() {
		if x.Class == ir.ClassFact && x.ID != "" {
			en = x
			break
		}
	}
	if en == nil {
		return notRun("the schema has no fact type to skew")
	}
	d := newDrawer(e.Schema, e.Opts.Seed, 4242)
	var data []byte
	for try := 0; try < 50 && data == nil; try++ {
		b, _ := json.Marshal(d.object(en.Fields))
		if td, _ := e.Catalog.Type(en.Name); td != nil && td.ParseJSON != nil {
			if _, err := td.ParseJSON(b); err == nil {
				data = b
			}
		}
	}
	if data == nil {
		return notRun("could not draw a valid %s payload", en.Name)
	}
	dir, err := os.MkdirTemp("", "writ-conformance-strict-")
	if err != nil {
		return notRun("%v", err)
	}
	defer os.RemoveAll(dir)
	cat := skewed{e.Catalog, en.Name}
	var out Outcome
	// Strict: the entry must not get past ingress.
	r, err := newRig(filepath.Join(dir, "strict"), cat, nopEval{})
	if err != nil {
		return notRun("%v", err)
	}
	panicked := func() (p any) {
		defer func() { p = recover() }()
		r.p.Report(ctx, pipeline.Entry{Type: en.Name, Payload: data})
		r.p.SubmitAsync(ctx, pipeline.Entry{Type: en.Name, ID: "strict-req", Payload: data})
		return nil
	}()
	r.stop()
	out.Cases++
	if panicked == nil {
		out.Findings = append(out.Findings, Finding{Code: ir.CodeUnclassifiedType, Status: ir.StatusBlocked, Subject: en.Name,
			Message: "an unclassified entry type passed ingress of a strict pipeline without failing fast",
			Fix:     "strict builds must panic when an unclassified type reaches the write path (W6)"})
	}
	// Production: handled as a fact, retained, never confirmed early.
	r, err = newRigStrict(filepath.Join(dir, "prod"), cat, nopEval{}, false)
	if err != nil {
		return notRun("%v", err)
	}
	defer r.stop()
	var ack pipeline.Ack
	if p := func() (p any) {
		defer func() { p = recover() }()
		ack = r.p.Report(ctx, pipeline.Entry{Type: en.Name, Payload: data})
		return nil
	}(); p != nil {
		// This binary was built with the strict tag: production behaviour
		// cannot be observed here; the strict half above was verified.
		return out
	}
	out.Cases++
	if !ack.Received || !outboxHas(r.dir, en.Name, ack.ID) {
		out.Findings = append(out.Findings, Finding{Code: ir.CodeUnclassifiedType, Status: ir.StatusBlocked, Subject: en.Name,
			Message: fmt.Sprintf("a production pipeline did not retain an unclassified entry as a fact (ack %+v)", ack),
			Fix:     "outside strict builds an unclassified type is logged and handled as a fact: never dropped (W6)"})
	}
	return out
}

// nopEval answers every item with an empty effect; the strict check never
// gets as far as evaluation.
type nopEval struct{}

func (nopEval) Evaluate(_ context.Context, items []pipeline.EvalItem) ([]pipeline.EvalResult, error) {
	return make([]pipeline.EvalResult, len(items)), nil
}
