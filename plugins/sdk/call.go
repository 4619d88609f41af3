package sdk

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"

	"github.com/writ-dev/writ/kv"
	"github.com/writ-dev/writ/schema/ir"
	"github.com/writ-dev/writ/schema/jsonscan"
)

// MachinePrefix starts the pipeline-owned machine-state keys
// "_m/<machine>/<instance>". Handlers read them and never write them.
const MachinePrefix = "_m/"

// Transition asks the pipeline to move another machine instance to a state
// (e.g. a dead worker's running jobs back to PENDING). The pipeline guards
// it like the entry's own transition.
type Transition struct {
	Machine string
	Key     string
	To      string
}

// Call is one entry being evaluated: its payload, the state it was given and
// the effect the handler builds. A Call is used by one goroutine only, and
// only for the duration of Handle: the SDK reuses Calls from one batch to
// the next, and the payload and state values it returns share the batch's
// request buffer, so a handler neither keeps them past Handle nor modifies
// them (copy what must outlive the call).
type Call struct {
	// Type is the entry type, e.g. "job.submit".
	Type string
	// ID is the request or fact ID of the entry.
	ID string

	raw     []byte
	payload ir.Payload
	state   []kv.Record

	writes      []kv.Write
	result      []byte
	transitions []Transition
	need        []string
	misuse      string
}

// RawPayload is the entry's JSON payload.
func (c *Call) RawPayload() []byte { return c.raw }

// Payload is the payload decoded and validated by the generated code, or nil
// when the Plugin has no Catalog. Use As for the concrete generated type.
func (c *Call) Payload() ir.Payload { return c.payload }

// As returns the call's payload as the generated type T, e.g.
// sdk.As[*jobsgen.JobSubmit](c). It fails with an internal error when the
// payload has another type.
func As[T ir.Payload](c *Call) (T, error) {
	p, ok := c.payload.(T)
	if !ok {
		var zero T
		return zero, Internal("entry %s: payload is %T, handler expects %T", c.Type, c.payload, zero)
	}
	return p, nil
}

// DecodePayload decodes the raw JSON payload into v (for plugins without a
// Catalog, or for a different view of the payload).
func (c *Call) DecodePayload(v any) error {
	if err := json.Unmarshal(c.raw, v); err != nil {
		return &Error{Kind: KindValidation, Msg: fmt.Sprintf("entry %s: payload: %v", c.Type, err)}
	}
	return nil
}

func (c *Call) lookup(key string) (kv.Record, bool) {
	for i := range c.state {
		if c.state[i].Key == key {
			return c.state[i], true
		}
	}
	return kv.Record{}, false
}

func (c *Call) needKey(key string) {
	for _, k := range c.need {
		if k == key {
			return
		}
	}
	c.need = append(c.need, key)
}

// Known reports whether key was part of the state the call was given
// (present or absent). Get, Put and Delete on an unknown key turn the
// item's answer into a request for that key.
func (c *Call) Known(key string) bool {
	_, ok := c.lookup(key)
	return ok
}

// Get returns the key's value and whether it exists, seeing the call's own
// earlier writes. A key not in the given state is requested (the handler's
// result is then discarded and the entry evaluated again with the key).
func (c *Call) Get(key string) ([]byte, bool) {
	for i := len(c.writes) - 1; i >= 0; i-- {
		if c.writes[i].Key == key {
			if c.writes[i].Delete {
				return nil, false
			}
			return c.writes[i].Value, true
		}
	}
	r, ok := c.lookup(key)
	if !ok {
		c.needKey(key)
		return nil, false
	}
	if r.Rev == 0 {
		return nil, false
	}
	return r.Value, true
}

// GetJSON decodes the key's JSON document into v. It reports false (and
// leaves v alone) when the key is absent.
func (c *Call) GetJSON(key string, v any) (bool, error) {
	b, ok := c.Get(key)
	if !ok {
		return false, nil
	}
	if err := json.Unmarshal(b, v); err != nil {
		return true, Internal("key %q holds a malformed document: %v", key, err)
	}
	return true, nil
}

// Rev is the key's revision in the given state (0 = absent or unknown).
func (c *Call) Rev(key string) uint64 {
	r, _ := c.lookup(key)
	return r.Rev
}

// MachineState reads the pipeline-owned state of one machine instance.
// ok is false when the instance does not exist yet.
func (c *Call) MachineState(machine, instance string) (state string, order uint64, ok bool) {
	key := MachinePrefix + machine + "/" + instance
	r, known := c.lookup(key)
	if !known {
		c.needKey(key)
		return "", 0, false
	}
	if r.Rev == 0 {
		return "", 0, false
	}
	if state, order, ok := parseMachineRecord(r.Value); ok {
		return state, order, true
	}
	var m struct {
		State string `json:"state"`
		Order uint64 `json:"order"`
	}
	if err := json.Unmarshal(r.Value, &m); err != nil {
		c.misused("machine record %q is malformed: %v", key, err)
		return "", 0, false
	}
	return m.State, m.Order, true
}

// parseMachineRecord decodes the canonical form the pipeline writes,
// exactly {"state":"S"} or {"state":"S","order":N} with S printable ASCII
// without quotes or backslashes and N a canonical decimal that fits in a
// uint64, without reflection; ok=false for anything else (MachineState then
// lets encoding/json decide).
func parseMachineRecord(v []byte) (state string, order uint64, ok bool) {
	const head = `{"state":"`
	if len(v) < len(head)+2 || string(v[:len(head)]) != head || v[len(v)-1] != '}' {
		return "", 0, false
	}
	rest := v[len(head) : len(v)-1]
	end := -1
	for i, c := range rest {
		if c == '"' {
			end = i
			break
		}
		if c < 0x20 || c > 0x7e || c == '\\' {
			return "", 0, false
		}
	}
	if end < 0 {
		return "", 0, false
	}
	st, rest := rest[:end], rest[end+1:]
	if len(rest) > 0 {
		const field = `,"order":`
		if len(rest) <= len(field) || string(rest[:len(field)]) != field {
			return "", 0, false
		}
		digits := rest[len(field):]
		if len(digits) > 1 && digits[0] == '0' {
			return "", 0, false
		}
		for _, c := range digits {
			if c < '0' || c > '9' {
				return "", 0, false
			}
			d := uint64(c - '0')
			if order > (math.MaxUint64-d)/10 {
				return "", 0, false
			}
			order = order*10 + d
		}
	}
	return string(st), order, true
}

func (c *Call) misused(format string, args ...any) {
	if c.misuse == "" {
		c.misuse = fmt.Sprintf(format, args...)
	}
}

func (c *Call) write(w kv.Write) {
	if strings.HasPrefix(w.Key, "_") || w.Key == "" {
		c.misused("handler wrote reserved or empty key %q (keys starting with \"_\" belong to writ)", w.Key)
		return
	}
	r, ok := c.lookup(w.Key)
	if !ok {
		c.needKey(w.Key)
		return
	}
	w.IfRev = r.Rev
	for i := range c.writes {
		if c.writes[i].Key == w.Key {
			c.writes[i] = w
			return
		}
	}
	c.writes = append(c.writes, w)
}

// Put writes value to key, guarded by the key's revision in the given state.
func (c *Call) Put(key string, value []byte) {
	c.write(kv.Write{Key: key, Value: value})
}

// PutJSON writes v's JSON encoding to key (see Put).
func (c *Call) PutJSON(key string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return Internal("encode %q: %v", key, err)
	}
	c.Put(key, b)
	return nil
}

// Delete removes key, guarded by its revision in the given state.
func (c *Call) Delete(key string) {
	c.write(kv.Write{Key: key, Delete: true})
}

// Transition asks for a state change of another machine instance.
func (c *Call) Transition(machine, key, to string) {
	c.transitions = append(c.transitions, Transition{Machine: machine, Key: key, To: to})
}

// SetResult sets the result document returned to the requester on commit:
// v's JSON encoding (encoding/json). Handlers that already hold the encoded
// document use SetResultJSON, which skips the reflection.
func (c *Call) SetResult(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return Internal("encode result: %v", err)
	}
	c.result = b
	return nil
}

// SetResultJSON sets the result document to doc, one JSON value the handler
// encoded itself. doc is checked for JSON syntax (what json.Valid accepts,
// in one scan without decoding or allocation) and SetResultJSON fails with
// an internal error when it is not one JSON value; it is kept as it is (not
// compacted or copied), so the handler must not modify doc after the call.
func (c *Call) SetResultJSON(doc []byte) error {
	if !jsonscan.Valid(doc) {
		return Internal("entry %s: result is not a JSON document: %q", c.Type, truncate(doc, 64))
	}
	c.result = doc
	return nil
}

func truncate(b []byte, n int) []byte {
	if len(b) > n {
		return b[:n]
	}
	return b
}
