package load

import (
	"fmt"
	"sync"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/cuecontext"
	cuejson "cuelang.org/go/encoding/json"
)

// payloadCache keeps each Result's closed payload values, so that checking
// many payloads does not rebuild them. Results are few and long-lived (one
// per loaded schema).
var payloadCache sync.Map // payloadKey → cachedPayload

type cachedPayload struct {
	pv  cue.Value
	ctx *cue.Context // builds the data values unified with pv
}

type payloadKey struct {
	r     *Result
	entry string
}

// CheckPayloadJSON is CUE's own verdict on a JSON payload of an entry type:
// nil when the data is a concrete, complete instance of the declared
// (closed) payload, else CUE's error. It is the oracle that generated
// validators must agree with (the conformance suite uses it, so that only
// this package imports cuelang.org/go). Calls on one Result must not run
// concurrently.
func (r *Result) CheckPayloadJSON(entry string, data []byte) error {
	k := payloadKey{r, entry}
	var cp cachedPayload
	if v, ok := payloadCache.Load(k); ok {
		cp = v.(cachedPayload)
	} else {
		pv, err := r.PayloadValue(entry)
		if err != nil {
			return err
		}
		cp = cachedPayload{pv: pv, ctx: cuecontext.New()}
		payloadCache.Store(k, cp)
	}
	expr, err := cuejson.Extract(entry+".json", data)
	if err != nil {
		return fmt.Errorf("load: payload of %q is not JSON: %w", entry, err)
	}
	return cp.pv.Unify(cp.ctx.BuildExpr(expr)).Validate(cue.Concrete(true), cue.Final())
}
