package pipeline

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/writ-dev/writ/kv"
	"github.com/writ-dev/writ/schema/ir"
)

// Reserved key prefixes owned by the pipeline.
const (
	MachinePrefix  = "_m/"
	ConflictPrefix = "_conflict/"
	ConfigPrefix   = "_config/"
	// ConfigCommittedKey holds the committed configuration tag; it advances
	// only when an activation applies.
	ConfigCommittedKey = "_config/committed"
	configStagedPrefix = "_config/staged/"
)

// MachineKey is the key of a machine instance's record.
func MachineKey(machine, instance string) string {
	return MachinePrefix + machine + "/" + instance
}

// ConflictKey is the key of the conflict case for a machine instance.
func ConflictKey(machine, instance string) string {
	return ConflictPrefix + machine + "/" + instance
}

// MachineRecord is the pipeline-owned value at _m/<machine>/<instance>.
type MachineRecord struct {
	State    string
	Order    uint64
	HasOrder bool
}

// AppendJSON appends the canonical encoding {"state":"S","order":N}.
func (r MachineRecord) AppendJSON(b []byte) []byte {
	if b == nil {
		b = make([]byte, 0, len(r.State)+40)
	}
	b = append(b, `{"state":`...)
	if plainASCII(r.State) {
		b = append(b, '"')
		b = append(b, r.State...)
		b = append(b, '"')
	} else {
		b = strconv.AppendQuote(b, r.State)
	}
	if r.HasOrder {
		b = append(b, `,"order":`...)
		b = strconv.AppendUint(b, r.Order, 10)
	}
	return append(b, '}')
}

// plainASCII reports whether strconv.Quote would only wrap s in quotes:
// printable ASCII without quotes or backslashes.
func plainASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// ParseMachineRecord decodes a machine record value.
func ParseMachineRecord(v []byte) (MachineRecord, error) {
	return parseMachineRecord(v, nil)
}

// parseMachineRecord decodes a machine record value. The canonical form
// AppendJSON writes is decoded directly (with the state name taken from m's
// declared states when it is one, so it needs no allocation); anything else
// goes through encoding/json, which decides what is accepted.
func parseMachineRecord(v []byte, m *ir.Machine) (MachineRecord, error) {
	if r, ok := parseCanonicalRecord(v, m); ok {
		return r, nil
	}
	var raw struct {
		State string  `json:"state"`
		Order *uint64 `json:"order"`
	}
	if err := json.Unmarshal(v, &raw); err != nil {
		return MachineRecord{}, fmt.Errorf("pipeline: machine record: %w", err)
	}
	if raw.State == "" {
		return MachineRecord{}, errors.New(`pipeline: machine record: field "state" is required`)
	}
	r := MachineRecord{State: raw.State}
	if raw.Order != nil {
		r.Order, r.HasOrder = *raw.Order, true
	}
	return r, nil
}

// parseCanonicalRecord decodes exactly {"state":"S"} or
// {"state":"S","order":N} with S printable ASCII without quotes or
// backslashes and N a canonical decimal that fits in uint64; ok=false for
// anything else (the caller falls back to encoding/json).
func parseCanonicalRecord(v []byte, m *ir.Machine) (MachineRecord, bool) {
	const head = `{"state":"`
	if len(v) < len(head)+3 || string(v[:len(head)]) != head || v[len(v)-1] != '}' {
		return MachineRecord{}, false
	}
	rest := v[len(head) : len(v)-1]
	end := -1
	for i, c := range rest {
		if c == '"' {
			end = i
			break
		}
		if c < 0x20 || c > 0x7e || c == '\\' {
			return MachineRecord{}, false
		}
	}
	if end <= 0 {
		return MachineRecord{}, false
	}
	state, rest := rest[:end], rest[end+1:]
	var r MachineRecord
	if len(rest) > 0 {
		const order = `,"order":`
		if len(rest) <= len(order) || string(rest[:len(order)]) != order {
			return MachineRecord{}, false
		}
		digits := rest[len(order):]
		if len(digits) > 1 && digits[0] == '0' {
			return MachineRecord{}, false
		}
		var n uint64
		for _, c := range digits {
			if c < '0' || c > '9' {
				return MachineRecord{}, false
			}
			d := uint64(c - '0')
			if n > (math.MaxUint64-d)/10 {
				return MachineRecord{}, false
			}
			n = n*10 + d
		}
		r.Order, r.HasOrder = n, true
	}
	r.State = internState(m, state)
	return r, true
}

// internState returns s as a string, reusing m's declared state name when
// it is one.
func internState(m *ir.Machine, s []byte) string {
	if m != nil {
		for _, st := range m.States {
			if st == string(s) {
				return st
			}
		}
	}
	return string(s)
}

// Decide is the runtime guard (W8): the verdict for moving an instance whose
// current record is cur (exists=false when absent) to state to, with an
// optional order. illegal is the verdict an illegal transition gets:
// VerdictReject for requests, VerdictQuarantine for facts. It is pure, so
// evaluation and every replica's apply reach the same verdict.
func Decide(m *ir.Machine, cur MachineRecord, exists bool, to string, order uint64, hasOrder bool, illegal Verdict) (Verdict, string) {
	return decide(m, cur, exists, to, order, hasOrder, illegal, true)
}

// decide is Decide; the reason is built only when why is set.
func decide(m *ir.Machine, cur MachineRecord, exists bool, to string, order uint64, hasOrder bool, illegal Verdict, why bool) (Verdict, string) {
	if !m.HasState(to) {
		if !why {
			return illegal, ""
		}
		return illegal, fmt.Sprintf("%s: %q is not a declared state (declared: %s)", m.Name, to, strings.Join(m.States, ", "))
	}
	if !exists {
		if m.IsInitial(to) {
			return VerdictApply, ""
		}
		if !why {
			return illegal, ""
		}
		return illegal, fmt.Sprintf("%s: instance does not exist and %s is not an initial state (initial: %s)", m.Name, to, strings.Join(m.Initial, ", "))
	}
	if hasOrder && cur.HasOrder {
		if order < cur.Order {
			if !why {
				return VerdictStale, ""
			}
			return VerdictStale, fmt.Sprintf("%s: order %d is older than recorded order %d", m.Name, order, cur.Order)
		}
		if order == cur.Order {
			if to == cur.State {
				if !why {
					return VerdictDuplicate, ""
				}
				return VerdictDuplicate, fmt.Sprintf("%s: order %d already recorded with state %s", m.Name, order, to)
			}
			if !why {
				return illegal, ""
			}
			return illegal, fmt.Sprintf("%s: order %d already recorded with state %s, now %s", m.Name, order, cur.State, to)
		}
	}
	if to == cur.State {
		if !why {
			return VerdictDuplicate, ""
		}
		return VerdictDuplicate, fmt.Sprintf("%s: already %s", m.Name, to)
	}
	if m.Allowed(cur.State, to) {
		return VerdictApply, ""
	}
	if m.IsTerminal(cur.State) {
		if canaryGuardTerminalExit && !m.IsTerminal(to) {
			return VerdictApply, "" // canary build: terminal → non-terminal allowed
		}
		if !why {
			return illegal, ""
		}
		return illegal, fmt.Sprintf("%s: %s is terminal; %s → %s would leave it", m.Name, cur.State, cur.State, to)
	}
	if !why {
		return illegal, ""
	}
	return illegal, fmt.Sprintf("%s: %s → %s is not a declared transition", m.Name, cur.State, to)
}

func illegalVerdict(c ir.Class) Verdict {
	if c == ir.ClassRequest || c == ir.ClassConfig {
		return VerdictReject
	}
	return VerdictQuarantine
}

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
}

// guardInfo is the pipeline-encoded kv.Command.Guard.
type guardInfo struct {
	Attempt     uint64 // proposer-local proposal number, to match results
	Reason      string // for recorded rejections and quarantines
	Transitions []guardTransition
}

const guardVersion = 1

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
	b = append(b, guardVersion)
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
	if v := r.byte1(); v != guardVersion {
		return rawGuard{}, fmt.Errorf("pipeline: guard: unsupported version %d", v)
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
	if len(b) == 0 || b[0] != guardVersion {
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
			To: string(t.to), Order: t.order, HasOrder: t.hasOrder, Verdict: t.verdict})
	}
	return nil
}

// nextMachineRecord is the machine record an applying transition writes.
func nextMachineRecord(t *guardTransition) MachineRecord {
	next := MachineRecord{State: t.To, Order: t.Order, HasOrder: t.HasOrder}
	if !t.HasOrder && t.FromHas {
		next.Order, next.HasOrder = t.FromOrder, true
	}
	return next
}

// errGuardMovedText marks a veto caused by state that moved between
// evaluation and apply; the proposer re-evaluates such commands.
const errGuardMovedText = "pipeline: guard moved"

// Checker is the apply-time guard (W8): raftstore calls Check for every
// command on every replica, before applying its effect. It reads only the
// command and committed state, so every replica decides the same.
type Checker struct {
	cat ir.Catalog
	// machines caches the catalog's answers to Machine by name (copy on
	// write), so a check looks a machine up without building a string.
	machines atomic.Pointer[[]namedMachine]
}

type namedMachine struct {
	name string
	m    *ir.Machine
}

var _ kv.Checker = (*Checker)(nil)

// NewChecker returns the apply-time guard for a catalog.
func NewChecker(cat ir.Catalog) *Checker { return &Checker{cat: cat} }

// machine is cat.Machine for a name still in the encoded guard.
func (c *Checker) machine(name []byte) (*ir.Machine, bool) {
	if ms := c.machines.Load(); ms != nil {
		for _, nm := range *ms {
			if nm.name == string(name) {
				return nm.m, true
			}
		}
	}
	n := string(name)
	m, ok := c.cat.Machine(n)
	if !ok {
		return nil, false
	}
	for {
		old := c.machines.Load()
		var next []namedMachine
		if old != nil {
			if len(*old) >= 256 {
				return m, true // a catalog this large is not cached further
			}
			next = append(next, *old...)
		}
		next = append(next, namedMachine{name: n, m: m})
		if c.machines.CompareAndSwap(old, &next) {
			return m, true
		}
	}
}

// machineKeyOf returns MachineKey(m.Name, instance), reusing the string of
// a write in the effect or the command's key when one matches.
func machineKeyOf(cmd *kv.Command, m *ir.Machine, instance []byte) string {
	for i := range cmd.Effect.Writes {
		k := cmd.Effect.Writes[i].Key
		if len(k) == len(MachinePrefix)+len(m.Name)+1+len(instance) && k[:len(MachinePrefix)] == MachinePrefix &&
			k[len(MachinePrefix):len(MachinePrefix)+len(m.Name)] == m.Name && k[len(MachinePrefix)+len(m.Name)] == '/' &&
			k[len(MachinePrefix)+len(m.Name)+1:] == string(instance) {
			return k
		}
	}
	return MachineKey(m.Name, string(instance))
}

// Check re-runs the guard of every transition the command carries against
// the replica's committed state, and checks that the effect writes exactly
// the machine records the verdicts allow. It returns an error (a veto) when
// they disagree.
func (c *Checker) Check(cmd *kv.Command, state kv.Reader) error {
	var tbuf [2]rawTransition
	g, err := decodeGuardRaw(cmd.Guard, tbuf[:0])
	if err != nil {
		return err
	}
	if Verdict(cmd.Verdict) == VerdictReject {
		if len(cmd.Effect.Writes) != 0 {
			return errors.New("pipeline: guard: a recorded rejection must not write")
		}
		return nil
	}
	illegal := illegalVerdict(ir.Class(cmd.Class))
	var keyBuf [4]string
	keys := keyBuf[:0]
	for i := range g.transitions {
		t := &g.transitions[i]
		m, ok := c.machine(t.machine)
		if !ok {
			return fmt.Errorf("pipeline: guard: unknown machine %q (schema skew between replicas?)", t.machine)
		}
		key := machineKeyOf(cmd, m, t.instance)
		keys = append(keys, key)
		rec, exists := state.Get(key)
		var cur MachineRecord
		if exists {
			if cur, err = parseMachineRecord(rec.Value, m); err != nil {
				return fmt.Errorf("pipeline: guard: %s: %w", key, err)
			}
		}
		to := internState(m, t.to)
		v, _ := decide(m, cur, exists, to, t.order, t.hasOrder, illegal, false)
		if rec.Rev != t.expectRev {
			if v != t.verdict {
				return fmt.Errorf("%s: %s moved (rev %d, evaluated at %d): verdict now %s, was %s", errGuardMovedText, key, rec.Rev, t.expectRev, v, t.verdict)
			}
		} else if v != t.verdict {
			return fmt.Errorf("pipeline: guard: %s: verdict %s at apply, %s at evaluation", key, v, t.verdict)
		}
		if t.verdict != VerdictApply {
			continue
		}
		var buf [96]byte
		next := MachineRecord{State: to, Order: t.order, HasOrder: t.hasOrder}
		if !t.hasOrder && t.fromHas {
			next.Order, next.HasOrder = t.fromOrder, true
		}
		want := next.AppendJSON(buf[:0])
		found := false
		for _, w := range cmd.Effect.Writes {
			if w.Key != key {
				continue
			}
			if found || w.Delete || w.Unconditional || !bytes.Equal(want, w.Value) {
				return fmt.Errorf("pipeline: guard: effect write of %s does not match its transition", key)
			}
			found = true
		}
		if !found {
			return fmt.Errorf("pipeline: guard: applying transition of %s has no write", key)
		}
	}
	for _, w := range cmd.Effect.Writes {
		if !strings.HasPrefix(w.Key, MachinePrefix) {
			continue
		}
		ok := false
		for i, k := range keys {
			if k == w.Key && g.transitions[i].verdict == VerdictApply {
				ok = true
			}
		}
		if !ok {
			return fmt.Errorf("pipeline: guard: effect writes %s without an applying transition", w.Key)
		}
	}
	return nil
}
