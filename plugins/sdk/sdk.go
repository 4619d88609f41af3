package sdk

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
	"sort"
	"sync"

	"github.com/writ-dev/writ/kv"
	"github.com/writ-dev/writ/schema/ir"
)

// Handler evaluates one entry type.
type Handler interface {
	Handle(ctx context.Context, c *Call) error
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, c *Call) error

// Handle calls f.
func (f HandlerFunc) Handle(ctx context.Context, c *Call) error { return f(ctx, c) }

// Plugin is a handler plugin: its identity and one Handler per entry type.
type Plugin struct {
	// Name identifies the plugin in host logs and status, e.g. "writ-jobs".
	Name string
	// Version is the plugin's release version.
	Version string
	// Catalog is the generated catalog of the schema the plugin was built
	// against. With it the SDK decodes and validates payloads into the
	// generated types and declares the schema's fingerprint.
	Catalog ir.Catalog
	// Fingerprint is the schema fingerprint; defaults to
	// Catalog.Fingerprint(). Required when Catalog is nil.
	Fingerprint string
	// Handlers maps entry type to its handler.
	Handlers map[string]Handler
}

// Item is one entry to evaluate.
type Item struct {
	Type    string
	ID      string
	Payload []byte
	State   []kv.Record
}

// Result answers one item: an effect (Writes, Result, Transitions), a
// request for more keys (NeedKeys), or an error (Err).
type Result struct {
	Writes      []kv.Write
	Result      []byte
	NeedKeys    []string
	Transitions []Transition
	Err         *Error
}

// Check validates the plugin's declaration: a name, at least one handler,
// a fingerprint, and (with a Catalog) only declared entry types.
func (p *Plugin) Check() error {
	if p.Name == "" {
		return fmt.Errorf("sdk: plugin has no Name; set Plugin.Name")
	}
	if len(p.Handlers) == 0 {
		return fmt.Errorf("sdk: plugin %s has no Handlers; register one per entry type", p.Name)
	}
	if p.fingerprint() == "" {
		return fmt.Errorf("sdk: plugin %s has no schema fingerprint; set Plugin.Catalog (or Plugin.Fingerprint)", p.Name)
	}
	for typ, h := range p.Handlers {
		if h == nil {
			return fmt.Errorf("sdk: plugin %s: handler for %q is nil", p.Name, typ)
		}
		if p.Catalog != nil {
			if _, ok := p.Catalog.Type(typ); !ok {
				return fmt.Errorf("sdk: plugin %s: type %q is not declared by the schema (fingerprint %s)", p.Name, typ, p.fingerprint())
			}
		}
	}
	return nil
}

func (p *Plugin) fingerprint() string {
	if p.Fingerprint != "" {
		return p.Fingerprint
	}
	if p.Catalog != nil {
		return p.Catalog.Fingerprint()
	}
	return ""
}

// Types lists the entry types the plugin serves, sorted.
func (p *Plugin) Types() []string {
	out := make([]string, 0, len(p.Handlers))
	for t := range p.Handlers {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}

// parallelMin is the batch size from which Evaluate spreads items over
// GOMAXPROCS goroutines (Serve runs plugins with one P unless GOMAXPROCS is
// set; see TuneRuntime). Handlers are pure, so items are independent.
const parallelMin = 32

// Evaluate runs the handlers for a batch of items; results are positional.
// It is the code path Serve uses for every batch, and what sdktest
// calls in process. Large batches are evaluated on several goroutines, so
// handlers must not share mutable state (they are pure by contract).
func (p *Plugin) Evaluate(ctx context.Context, items []Item) []Result {
	var sc scratch
	return p.evaluate(ctx, items, &sc)
}

// scratch holds the per-batch slices of Evaluate so that an evaluation
// stream reuses them from one batch to the next: results, calls and the
// first write of every call (most handlers write one key). The results of
// a batch alias it until the next batch.
type scratch struct {
	out    []Result
	calls  []Call
	writes []kv.Write
}

func (p *Plugin) evaluate(ctx context.Context, items []Item, sc *scratch) []Result {
	n := len(items)
	if cap(sc.out) < n {
		sc.out = make([]Result, n)
		sc.calls = make([]Call, n)
		sc.writes = make([]kv.Write, n)
	}
	out, calls, writes := sc.out[:n], sc.calls[:n], sc.writes[:n]
	// A reused batch held the previous batch's results and calls.
	clear(out)
	clear(calls)
	clear(writes)
	for i := range calls {
		calls[i].writes = writes[i : i : i+1]
	}
	workers := runtime.GOMAXPROCS(0)
	if len(items) < parallelMin || workers < 2 {
		for i := range items {
			out[i] = p.evaluateOne(ctx, &items[i], &calls[i])
		}
		return out
	}
	chunk := (len(items) + workers - 1) / workers
	var wg sync.WaitGroup
	for lo := 0; lo < len(items); lo += chunk {
		hi := min(lo+chunk, len(items))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := lo; i < hi; i++ {
				out[i] = p.evaluateOne(ctx, &items[i], &calls[i])
			}
		}()
	}
	wg.Wait()
	return out
}

// evaluateOne runs the handler for it with the call c, which holds only
// its preallocated write slice.
func (p *Plugin) evaluateOne(ctx context.Context, it *Item, c *Call) (res Result) {
	defer func() {
		if r := recover(); r != nil {
			res = Result{Err: &Error{Kind: KindInternal, Msg: fmt.Sprintf("handler for %s panicked: %v\n%s", it.Type, r, debug.Stack())}}
		}
	}()
	h, ok := p.Handlers[it.Type]
	if !ok {
		return Result{Err: Internal("plugin %s does not serve entry type %q", p.Name, it.Type)}
	}
	c.Type, c.ID, c.raw, c.state = it.Type, it.ID, it.Payload, it.State
	if p.Catalog != nil {
		desc, ok := p.Catalog.Type(it.Type)
		if !ok || desc.ParseJSON == nil {
			return Result{Err: Internal("entry type %q has no generated decoder", it.Type)}
		}
		pl, err := desc.ParseJSON(it.Payload)
		if err != nil {
			return Result{Err: &Error{Kind: KindValidation, Msg: err.Error()}}
		}
		c.payload = pl
	}
	err := h.Handle(ctx, c)
	if len(c.need) > 0 {
		// The handler looked at keys it was not given: whatever it
		// concluded is discarded and the entry is evaluated again with
		// those keys.
		return Result{NeedKeys: c.need}
	}
	if err != nil {
		return Result{Err: asError(err)}
	}
	if c.misuse != "" {
		return Result{Err: &Error{Kind: KindInternal, Msg: c.misuse}}
	}
	if len(c.writes) == 0 {
		c.writes = nil
	}
	return Result{Writes: c.writes, Result: c.result, Transitions: c.transitions}
}
