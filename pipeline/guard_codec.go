package pipeline

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// guardTransition is one guarded transition carried in kv.Command.Guard.
type guardTransition struct {
	Machine   string
	Instance  string
	ExpectRev uint64 // revision of the machine record at evaluation
	From      string // "" when absent
	FromOrder uint64
	FromHas   bool
	To        string
	Order     uint64
	HasOrder  bool
	Verdict   Verdict
	// Order epochs (guard version 2): the record's epoch at evaluation,
	// the entry's, and whether the entry opens a new one.
	FromScope    string
	FromScopeHas bool
	Scope        string
	HasScope     bool
	Opens        bool
}

// from is the machine record the transition was decided on.
func (t *guardTransition) from() MachineRecord {
	return MachineRecord{State: t.From, Order: t.FromOrder, HasOrder: t.FromHas, Scope: t.FromScope, HasScope: t.FromScopeHas}
}

// incoming is what the entry said about the instance.
func (t *guardTransition) incoming() Incoming {
	return Incoming{To: t.To, Order: t.Order, HasOrder: t.HasOrder, Scope: t.Scope, HasScope: t.HasScope, Opens: t.Opens}
}

// epochs reports whether the transition carries order-epoch fields, which
// only guard version 2 encodes.
func (t *guardTransition) epochs() bool { return t.FromScopeHas || t.HasScope || t.Opens }

// guardInfo is the pipeline-encoded kv.Command.Guard.
type guardInfo struct {
	Attempt     uint64 // proposer-local proposal number, to match results
	Reason      string // for recorded rejections and quarantines
	Transitions []guardTransition
}

// Guard versions: 1 carries no order epochs; 2 adds, per transition, a
// flags byte (epochFrom, epochIn, epochOpens) and the epochs it flags. A
// guard without epochs is written as version 1, so a schema without
// order_scope replicates exactly as before.
const (
	guardVersion       = 1
	guardVersionEpochs = 2
)

// Epoch flags of a version-2 transition.
const (
	epochFrom  = 1 << 0 // FromScope follows
	epochIn    = 1 << 1 // Scope follows
	epochOpens = 1 << 2
	epochAll   = epochFrom | epochIn | epochOpens
)

func (g *guardInfo) version() byte {
	for i := range g.Transitions {
		if g.Transitions[i].epochs() {
			return guardVersionEpochs
		}
	}
	return guardVersion
}

func appendStr(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendOpt(b []byte, v uint64, ok bool) []byte {
	if !ok {
		return append(b, 0)
	}
	b = append(b, 1)
	return binary.AppendUvarint(b, v)
}

// size bounds the encoded length: exact, except that it leaves room for
// any attempt number (set after sizing).
func (g *guardInfo) size() int {
	n := 1 + binary.MaxVarintLen64 + strLen(g.Reason) + uvarintLen(uint64(len(g.Transitions)))
	for i := range g.Transitions {
		t := &g.Transitions[i]
		n += strLen(t.Machine) + strLen(t.Instance) + uvarintLen(t.ExpectRev) + strLen(t.From) +
			optLen(t.FromOrder, t.FromHas) + strLen(t.To) + optLen(t.Order, t.HasOrder) + 1
		if t.epochs() {
			n++
			if t.FromScopeHas {
				n += strLen(t.FromScope)
			}
			if t.HasScope {
				n += strLen(t.Scope)
			}
		}
	}
	return n
}

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

func strLen(s string) int { return uvarintLen(uint64(len(s))) + len(s) }

func optLen(v uint64, ok bool) int {
	if !ok {
		return 1
	}
	return 1 + uvarintLen(v)
}

func (g *guardInfo) appendTo(b []byte) []byte {
	ver := g.version()
	b = append(b, ver)
	b = binary.AppendUvarint(b, g.Attempt)
	b = appendStr(b, g.Reason)
	b = binary.AppendUvarint(b, uint64(len(g.Transitions)))
	for i := range g.Transitions {
		t := &g.Transitions[i]
		b = appendStr(b, t.Machine)
		b = appendStr(b, t.Instance)
		b = binary.AppendUvarint(b, t.ExpectRev)
		b = appendStr(b, t.From)
		b = appendOpt(b, t.FromOrder, t.FromHas)
		b = appendStr(b, t.To)
		b = appendOpt(b, t.Order, t.HasOrder)
		b = append(b, byte(t.Verdict))
		if ver == guardVersionEpochs {
			var f byte
			if t.FromScopeHas {
				f |= epochFrom
			}
			if t.HasScope {
				f |= epochIn
			}
			if t.Opens {
				f |= epochOpens
			}
			b = append(b, f)
			if t.FromScopeHas {
				b = appendStr(b, t.FromScope)
			}
			if t.HasScope {
				b = appendStr(b, t.Scope)
			}
		}
	}
	return b
}

type guardReader struct {
	b   []byte
	err error
}

func (r *guardReader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = errors.New("pipeline: guard: truncated varint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *guardReader) byte1() byte {
	if r.err != nil {
		return 0
	}
	if len(r.b) == 0 {
		r.err = errors.New("pipeline: guard: truncated")
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *guardReader) str() string {
	if b := r.bytes(); len(b) > 0 {
		return string(b)
	}
	return ""
}

func (r *guardReader) bytes() []byte {
	n := r.uvarint()
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.b)) {
		r.err = errors.New("pipeline: guard: string longer than input")
		return nil
	}
	s := r.b[:n:n]
	r.b = r.b[n:]
	return s
}

func (r *guardReader) opt() (uint64, bool) {
	switch r.byte1() {
	case 0:
		return 0, false
	case 1:
		return r.uvarint(), true
	}
	if r.err == nil {
		r.err = errors.New("pipeline: guard: bad option flag")
	}
	return 0, false
}

// rawTransition is a guardTransition whose strings still point into the
// encoded guard.
type rawTransition struct {
	machine, instance, from, to []byte
	expectRev, fromOrder, order uint64
	fromHas, hasOrder           bool
	verdict                     Verdict
	fromScope, scope            []byte
	fromScopeHas, hasScope      bool
	opens                       bool
}

// incoming is what the entry said about the instance; to is the target
// state as a string.
func (t *rawTransition) incoming(to string) Incoming {
	in := Incoming{To: to, Order: t.order, HasOrder: t.hasOrder, HasScope: t.hasScope, Opens: t.opens}
	if t.hasScope {
		in.Scope = string(t.scope)
	}
	return in
}

// fromRecord is the record the transition was decided on (from as a
// string); exists=false when there was none.
func (t *rawTransition) fromRecord(from string) (MachineRecord, bool) {
	r := MachineRecord{State: from, Order: t.fromOrder, HasOrder: t.fromHas, HasScope: t.fromScopeHas}
	if t.fromScopeHas {
		r.Scope = string(t.fromScope)
	}
	return r, from != ""
}

// rawGuard is a decoded guard whose strings still point into the encoding.
type rawGuard struct {
	attempt     uint64
	reason      []byte
	transitions []rawTransition
}

// decodeGuardRaw parses kv.Command.Guard without copying strings; the
// transitions are appended to buf (callers may pass a stack buffer). An
// empty guard decodes to the zero guard.
func decodeGuardRaw(b []byte, buf []rawTransition) (rawGuard, error) {
	if len(b) == 0 {
		return rawGuard{}, nil
	}
	r := guardReader{b: b}
	ver := r.byte1()
	if ver != guardVersion && ver != guardVersionEpochs {
		return rawGuard{}, fmt.Errorf("pipeline: guard: unsupported version %d", ver)
	}
	attempt := r.uvarint()
	reason := r.bytes()
	n := r.uvarint()
	if r.err == nil && n > uint64(len(r.b)) {
		return rawGuard{}, errors.New("pipeline: guard: transition count exceeds input")
	}
	ts := buf
	for i := uint64(0); i < n && r.err == nil; i++ {
		var t rawTransition
		t.machine = r.bytes()
		t.instance = r.bytes()
		t.expectRev = r.uvarint()
		t.from = r.bytes()
		t.fromOrder, t.fromHas = r.opt()
		t.to = r.bytes()
		t.order, t.hasOrder = r.opt()
		t.verdict = Verdict(r.byte1())
		if ver == guardVersionEpochs {
			f := r.byte1()
			if f&^epochAll != 0 && r.err == nil {
				r.err = errors.New("pipeline: guard: bad epoch flags")
			}
			if t.fromScopeHas = f&epochFrom != 0; t.fromScopeHas {
				t.fromScope = r.bytes()
			}
			if t.hasScope = f&epochIn != 0; t.hasScope {
				t.scope = r.bytes()
			}
			t.opens = f&epochOpens != 0
		}
		ts = append(ts, t)
	}
	if r.err != nil {
		return rawGuard{}, r.err
	}
	if len(r.b) != 0 {
		return rawGuard{}, errors.New("pipeline: guard: trailing bytes")
	}
	return rawGuard{attempt: attempt, reason: reason, transitions: ts}, nil
}

// guardAttempt is the attempt number of an encoded guard (0 when it does
// not decode).
func guardAttempt(b []byte) uint64 {
	if len(b) == 0 || (b[0] != guardVersion && b[0] != guardVersionEpochs) {
		return 0
	}
	g, err := decodeGuardRaw(b, nil)
	if err != nil {
		return 0
	}
	return g.attempt
}

// decodeGuard parses kv.Command.Guard. An empty guard decodes to the zero
// guardInfo.
func decodeGuard(b []byte) (guardInfo, error) {
	var g guardInfo
	err := decodeGuardInto(b, &g)
	return g, err
}

// decodeGuardInto decodes into g, appending to g.Transitions (callers may
// pass a stack buffer).
func decodeGuardInto(b []byte, g *guardInfo) error {
	var tbuf [2]rawTransition
	raw, err := decodeGuardRaw(b, tbuf[:0])
	if err != nil {
		*g = guardInfo{}
		return err
	}
	g.Attempt = raw.attempt
	g.Reason = string(raw.reason)
	for i := range raw.transitions {
		t := &raw.transitions[i]
		g.Transitions = append(g.Transitions, guardTransition{Machine: string(t.machine), Instance: string(t.instance),
			ExpectRev: t.expectRev, From: string(t.from), FromOrder: t.fromOrder, FromHas: t.fromHas,
			To: string(t.to), Order: t.order, HasOrder: t.hasOrder, Verdict: t.verdict,
			FromScope: string(t.fromScope), FromScopeHas: t.fromScopeHas, Scope: string(t.scope), HasScope: t.hasScope, Opens: t.opens})
	}
	return nil
}

// nextMachineRecord is the machine record an applying transition writes.
// It is the same record for an applying transition and for a duplicate
// that advances the order (NextRecord).
func nextMachineRecord(t *guardTransition) MachineRecord {
	return advanceRecord(t.from(), t.From != "", t.incoming())
}
