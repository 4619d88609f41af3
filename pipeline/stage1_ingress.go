package pipeline

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/writ-dev/writ/schema/ir"
)

// Class reports how the pipeline would classify a type (ok=false when the
// catalog does not declare it).
func (p *Pipeline) Class(typ string) (ir.Class, bool) {
	d, ok := p.cat.Type(typ)
	if !ok {
		return ir.ClassUnknown, false
	}
	return d.Class, true
}

// validated is the hand-off from ingress to the class behaviour: an entry
// whose payload decoded and passed the schema's rules, with its class and
// ID. newEntry turns it into the entry that moves through the stages.
type validated struct {
	desc    *ir.TypeDesc
	class   ir.Class
	payload ir.Payload
	json    []byte
	id      string
}

func reject(typ, field, rule, msg string) Outcome {
	return Outcome{Type: typ, Status: StatusRejected, Field: field, Rule: rule,
		Reason: fmt.Sprintf("%s: field %q: %s (rule %s)", typ, field, msg, rule)}
}

// validate is the ingress stage: size, declared type, class, payload
// decoding with the schema's rules, and the ID. A refusal is an Outcome
// REJECTED naming the field and the rule.
func (p *Pipeline) validate(en Entry) (validated, *Outcome) {
	defer p.mstage(stageValidate, p.mstart())
	var ps validated
	if len(en.Payload) > p.cfg.MaxPayload {
		o := reject(en.Type, "payload", "size <= "+strconv.Itoa(p.cfg.MaxPayload),
			fmt.Sprintf("payload is %d bytes; split it or raise the node's max payload", len(en.Payload)))
		return ps, &o
	}
	d, ok := p.cat.Type(en.Type)
	if !ok {
		o := reject(en.Type, "type", "declared", fmt.Sprintf("unknown entry type %q: use a type declared in the schema (fingerprint %s)", en.Type, p.cat.Fingerprint()))
		return ps, &o
	}
	ps.desc, ps.class = d, d.Class
	if !d.Class.Valid() {
		if p.strict {
			panic(fmt.Sprintf("pipeline: W6 violated: entry type %q reached the write path without a classification", en.Type))
		}
		p.lg.Error("pipeline: unclassified entry type at ingress; handling it as a fact (W6)", "type", en.Type)
		ps.class = ir.ClassFact
	}
	var err error
	switch en.Format {
	case FormatJSON:
		if d.ParseJSON == nil {
			err = errors.New("no JSON decoder generated")
		} else {
			ps.payload, err = d.ParseJSON(en.Payload)
		}
		ps.json = en.Payload
	case FormatBinary:
		if d.ParseBinary == nil {
			err = errors.New("no binary decoder generated")
		} else {
			ps.payload, err = d.ParseBinary(en.Payload)
		}
		if err == nil {
			ps.json, err = json.Marshal(ps.payload)
		}
	default:
		o := reject(en.Type, "format", "json|binary", fmt.Sprintf("unknown payload format %d", en.Format))
		return ps, &o
	}
	if err != nil {
		var fe *ir.FieldError
		if errors.As(err, &fe) {
			o := rejectField(fe)
			if o.Type == "" {
				o.Type = en.Type
			}
			return ps, &o
		}
		o := reject(en.Type, "payload", "decode", "payload does not decode: "+err.Error())
		return ps, &o
	}
	if ps.payload == nil {
		o := reject(en.Type, "payload", "decode", "payload decoded to nothing")
		return ps, &o
	}
	ps.id = en.ID
	if ps.id == "" {
		ps.id = ps.payload.IdempotencyKey()
	}
	if ps.id == "" || len(ps.id) > MaxIDBytes {
		field := "id"
		if d.Entry != nil && d.Entry.ID != "" && en.ID == "" {
			field = d.Entry.ID
		}
		if ps.id == "" {
			o := reject(en.Type, field, "required", "an ID is required: set the request/fact ID so retries are deduplicated")
			return ps, &o
		}
		o := reject(en.Type, field, "len <= "+strconv.Itoa(MaxIDBytes), fmt.Sprintf("the ID is %d bytes; use a shorter one", len(ps.id)))
		return ps, &o
	}
	return ps, nil
}

func requestCmdID(id string) string    { return "req:" + id }
func factCmdID(typ, id string) string  { return "fact:" + typ + ":" + id }
func configCmdID(id, ph string) string { return "cfg:" + id + ":" + ph }

// newEntry builds an entry for a validated payload. The command ID is the
// concatenation of idParts; it, the machine key and (for facts) the
// conflict key share one allocation.
func (p *Pipeline) newEntry(k kind, ps validated, idParts ...string) *entry {
	e := &entry{kind: k, class: ps.class, desc: ps.desc, typ: ps.desc.Name, userID: ps.id,
		payload: ps.payload, json: ps.json}
	keys := ps.payload.Keys()
	n := len(keys)
	if ps.desc.Machine != nil {
		e.machine = ps.desc.Machine
		e.inst = ps.payload.InstanceKey()
		if e.inst != "" {
			n++ // machine key
			if e.class != ir.ClassRequest {
				n++ // conflict key
			}
		}
	}
	if n <= len(e.keyBuf) {
		e.keys = e.keyBuf[:0]
	} else {
		e.keys = make([]string, 0, n)
	}
	e.keys = append(e.keys, keys...)
	idLen := 0
	for _, s := range idParts {
		idLen += len(s)
	}
	withMachine := e.machine != nil && e.inst != ""
	withConflict := withMachine && e.class != ir.ClassRequest
	size := idLen
	if withMachine {
		size += len(MachinePrefix) + len(e.machine.Name) + 1 + len(e.inst)
	}
	if withConflict {
		size += len(ConflictPrefix) + len(e.machine.Name) + 1 + len(e.inst)
	}
	var sb strings.Builder
	sb.Grow(size)
	for _, s := range idParts {
		sb.WriteString(s)
	}
	if withMachine {
		sb.WriteString(MachinePrefix)
		sb.WriteString(e.machine.Name)
		sb.WriteByte('/')
		sb.WriteString(e.inst)
	}
	mkeyEnd := sb.Len()
	if withConflict {
		sb.WriteString(ConflictPrefix)
		sb.WriteString(e.machine.Name)
		sb.WriteByte('/')
		sb.WriteString(e.inst)
	}
	all := sb.String()
	e.cmdID = all[:idLen]
	if withMachine {
		e.mkey = all[idLen:mkeyEnd]
		e.keys = append(e.keys, e.mkey)
	}
	if withConflict {
		e.keys = append(e.keys, all[mkeyEnd:])
	}
	return e
}

func verbFor(c ir.Class) string {
	switch c {
	case ir.ClassFact:
		return "Report"
	case ir.ClassReceipt:
		return "Deliver"
	case ir.ClassConfig:
		return "ConfigUpgrade"
	}
	return "Submit"
}

func (p *Pipeline) traceReject(en Entry, o *Outcome) {
	p.mrefused(en.Type, "validation")
	if p.cfg.Trace == nil {
		return
	}
	p.mu.Lock()
	p.cfg.Trace(TraceEvent{Stage: "validate", ID: en.ID, Type: en.Type, Detail: "rejected " + o.Field + ": " + o.Rule})
	p.mu.Unlock()
}
