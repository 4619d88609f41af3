package robustness

import (
	"fmt"
	"sort"
	"strings"

	"github.com/writ-dev/writ/pipeline"
	"github.com/writ-dev/writ/schema/ir"
)

// Check (e), the guards (W8), by replaying the committed log as a watcher
// received it against the schema's machines — the schema's declarations,
// not the pipeline's guard code, so a broken guard cannot vouch for
// itself. Each event is matched to the call that carried its command ID
// (the payload the client sent) and the catalog decodes the payload's
// target state, order and order epoch. Per machine key the replay keeps
// the state, the recorded order and the epoch, and fails the run when:
//
//   - an event applied (verdict apply) moves an instance out of a
//     terminal state ("terminal state left");
//   - an applied event carries an order not above the recorded one in the
//     same epoch ("stale order applied"); a duplicate verdict with a newer
//     order advances the recorded order, as the contract says, so an older
//     report applied after it is stale;
//   - after heal, a node's record of the key is not the one the replay
//     arrived at ("final state"): the order and epoch, and the state when
//     the replay ends in a terminal one (handlers may report transitions
//     of other instances, which are not on the stream under the key; they
//     keep the order and epoch and cannot leave a terminal state).
//
// A key whose events the replay cannot follow (a command ID that no
// recorded call carried, or several payloads under one ID that applied)
// is not judged past that point and is counted in the detail as skipped.

// keyReplay is one machine key's replayed record.
type keyReplay struct {
	rec     pipeline.MachineRecord
	exists  bool
	lost    string // why the replay cannot follow this key any more
	applied int
}

// cmdPayloads maps a command ID (req:<id>, fact:<type>:<id>) to the call
// that carried it: its type, key and payloads (several when one ID was
// sent with different payloads).
type cmdCall struct {
	typ, key string
	payloads []string
}

func callsByCmd(ops []Op) map[string]*cmdCall {
	m := map[string]*cmdCall{}
	for _, op := range ops {
		var id string
		switch op.Kind {
		case "submit":
			id = "req:" + op.ID
		case "report":
			id = "fact:" + op.Type + ":" + op.ID
		case "item":
			id = op.ID
		default:
			continue
		}
		if op.Reuse {
			continue // sent after the ID was answered COMMITTED: the first payload counts
		}
		c := m[id]
		if c == nil {
			c = &cmdCall{typ: op.Type, key: op.Key}
			m[id] = c
		}
		found := false
		for _, p := range c.payloads {
			found = found || p == op.Payload
		}
		if !found {
			c.payloads = append(c.payloads, op.Payload)
		}
	}
	return m
}

// checkGuards replays events (a complete watcher's, in index order);
// finals are every node's record of each key after heal.
// committed maps command IDs to the index Outcome gives them.
func checkGuards(cat ir.Catalog, events []watchEvent, calls map[string]*cmdCall, committed map[string]uint64, finals map[string][]finalRecord) CheckResult {
	r := CheckResult{Name: "guards", Pass: true}
	keys := map[string]*keyReplay{}
	seenID := map[string]bool{}
	for _, e := range events {
		if !logEvent(e) {
			continue
		}
		c := calls[e.ID]
		first := !seenID[e.ID]
		seenID[e.ID] = true
		if c == nil {
			continue // a fence, a config phase, a command of no recorded call
		}
		td, ok := cat.Type(c.typ)
		if !ok || td.Machine == nil {
			continue
		}
		k := keys[c.key]
		if k == nil {
			k = &keyReplay{}
			keys[c.key] = k
		}
		if k.lost != "" || !first {
			continue
		}
		changes := e.Status == "apply" || e.Status == "applied" || e.Status == "duplicate"
		if !changes {
			continue
		}
		if len(c.payloads) != 1 {
			k.lost = fmt.Sprintf("index %d: %s was sent with %d payloads", e.Index, e.ID, len(c.payloads))
			continue
		}
		p, err := td.ParseJSON([]byte(c.payloads[0]))
		if err != nil {
			k.lost = fmt.Sprintf("index %d: %s: payload does not parse: %v", e.Index, e.ID, err)
			continue
		}
		in := incoming(td, p)
		if in.To == "" {
			continue // a type that names no target state is not guarded and changes no record
		}
		if ci, ok := committed[e.ID]; ok && ci < e.Index {
			// Read back from a log, an ID decided again later shows only
			// there: the first decision is not on this stream.
			k.lost = fmt.Sprintf("index %d: %s first committed at %d, not on the stream", e.Index, e.ID, ci)
			continue
		}
		if e.Status == "duplicate" {
			// A duplicate verdict: the state stays; a newer order (or an
			// epoch the record lacks) is recorded.
			if k.exists && !in.Opens && ((in.HasOrder && (!k.rec.HasOrder || in.Order > k.rec.Order)) || (in.HasScope && !k.rec.HasScope)) {
				k.rec = advance(k.rec, k.exists, in)
			}
			continue
		}
		k.applied++
		if k.exists && td.Machine.IsTerminal(k.rec.State) && in.To != k.rec.State {
			r.fail("%s: terminal state left: %s at index %d moved %s from %s to %s", c.key, e.ID, e.Index, c.key, k.rec.State, in.To)
		}
		if k.exists && !in.Opens && in.HasOrder && k.rec.HasOrder && in.Order <= k.rec.Order && (td.Entry.OrderScope == "" || (k.rec.HasScope && in.Scope == k.rec.Scope)) {
			r.fail("%s: stale order applied: %s at index %d has order %d, the record had order %d (epoch %q)", c.key, e.ID, e.Index, in.Order, k.rec.Order, k.rec.Scope)
		}
		k.rec = advance(k.rec, k.exists, in)
		k.exists = true
	}
	names := make([]string, 0, len(keys))
	for key := range keys {
		names = append(names, key)
	}
	sort.Strings(names)
	var skipped []string
	for _, key := range names {
		k := keys[key]
		r.Cases++
		if k.lost != "" {
			skipped = append(skipped, key+" ("+k.lost+")")
			continue
		}
		for _, f := range finals[key] {
			if f.err != "" {
				continue
			}
			// Handlers may report transitions of other instances (not on
			// the stream under this key), which keep the order and epoch
			// and cannot leave a terminal state: the order and epoch must
			// match, and a terminal state must still be the state.
			got, want := f.rec, k.rec
			if !td0(cat, key).IsTerminal(want.State) {
				got.State, want.State = "", ""
			}
			if f.found != k.exists || (k.exists && got != want) {
				r.fail("%s: final state on %s is %s, the replay of the log's %d applied commands gives %s", key, f.node, recDesc(f.found, f.rec), k.applied, recDesc(k.exists, k.rec))
				break
			}
		}
	}
	if len(skipped) > 0 && len(r.Detail) < 8 {
		r.Detail = append(r.Detail, "not replayed past: "+strings.Join(skipped, "; "))
	}
	return r
}

// td0 is the machine of a machine key (_m/<machine>/<instance>), or an
// empty machine.
func td0(cat ir.Catalog, key string) *ir.Machine {
	rest := strings.TrimPrefix(key, pipeline.MachinePrefix)
	name, _, _ := strings.Cut(rest, "/")
	for _, m := range cat.Schema().Machines {
		if m.Name == name {
			return m
		}
	}
	return &ir.Machine{}
}

// incoming decodes what the guard sees of a payload: target state (the
// current one when the type names none), order and epoch.
func incoming(td *ir.TypeDesc, p ir.Payload) pipeline.Incoming {
	in := pipeline.Incoming{To: p.TargetState()}
	in.Order, in.HasOrder = p.Order()
	if td.Entry.OrderScope != "" {
		if s, ok := p.(ir.OrderScoper); ok {
			in.Scope, in.HasScope = s.OrderScope(), true
		}
		in.Opens = td.Entry.OpensEpoch()
	}
	return in
}

// advance is the record after an applied entry (or a duplicate that
// advances the order): the contract's rule, written out here rather than
// taken from the pipeline.
func advance(cur pipeline.MachineRecord, exists bool, in pipeline.Incoming) pipeline.MachineRecord {
	next := pipeline.MachineRecord{State: in.To}
	if in.Opens {
		next.Scope, next.HasScope = in.Scope, true
		return next
	}
	switch {
	case in.HasOrder:
		next.Order, next.HasOrder = in.Order, true
	case exists && cur.HasOrder:
		next.Order, next.HasOrder = cur.Order, true
	}
	switch {
	case in.HasScope:
		next.Scope, next.HasScope = in.Scope, true
	case exists && cur.HasScope:
		next.Scope, next.HasScope = cur.Scope, true
	}
	return next
}

func recDesc(found bool, r pipeline.MachineRecord) string {
	if !found {
		return "absent"
	}
	return string(r.AppendJSON(nil))
}

// finalRecord is one node's record of a key after heal.
type finalRecord struct {
	node  string
	found bool
	rev   uint64
	rec   pipeline.MachineRecord
	err   string
}
