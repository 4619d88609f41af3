package load

import (
	"fmt"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/cuecontext"
	cuejson "cuelang.org/go/encoding/json"
)

// CheckPayloadJSON is CUE's own verdict on a JSON payload of an entry type:
// nil when the data is a concrete, complete instance of the declared
// (closed) payload, else CUE's error. It is the oracle that generated
// validators must agree with (the conformance suite uses it, so that only
// this package imports cuelang.org/go).
func (r *Result) CheckPayloadJSON(entry string, data []byte) error {
	pv, err := r.PayloadValue(entry)
	if err != nil {
		return err
	}
	expr, err := cuejson.Extract(entry+".json", data)
	if err != nil {
		return fmt.Errorf("load: payload of %q is not JSON: %w", entry, err)
	}
	return pv.Unify(cuecontext.New().BuildExpr(expr)).Validate(cue.Concrete(true), cue.Final())
}
