package pipeline

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

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
	b = strconv.AppendQuote(b, r.State)
	if r.HasOrder {
		b = append(b, `,"order":`...)
		b = strconv.AppendUint(b, r.Order, 10)
	}
	return append(b, '}')
}

// ParseMachineRecord decodes a machine record value.
func ParseMachineRecord(v []byte) (MachineRecord, error) {
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

// Decide is the runtime guard (W8): the verdict for moving an instance whose
// current record is cur (exists=false when absent) to state to, with an
// optional order. illegal is the verdict an illegal transition gets:
// VerdictReject for requests, VerdictQuarantine for facts. It is pure, so
// evaluation and every replica's apply reach the same verdict.
func Decide(m *ir.Machine, cur MachineRecord, exists bool, to string, order uint64, hasOrder bool, illegal Verdict) (Verdict, string) {
	if !m.HasState(to) {
		return illegal, fmt.Sprintf("%s: %q is not a declared state (declared: %s)", m.Name, to, strings.Join(m.States, ", "))
	}
	if !exists {
		if m.IsInitial(to) {
			return VerdictApply, ""
		}
		return illegal, fmt.Sprintf("%s: instance does not exist and %s is not an initial state (initial: %s)", m.Name, to, strings.Join(m.Initial, ", "))
	}
	if hasOrder && cur.HasOrder {
		if order < cur.Order {
			return VerdictStale, fmt.Sprintf("%s: order %d is older than recorded order %d", m.Name, order, cur.Order)
		}
		if order == cur.Order {
			if to == cur.State {
				return VerdictDuplicate, fmt.Sprintf("%s: order %d already recorded with state %s", m.Name, order, to)
			}
			return illegal, fmt.Sprintf("%s: order %d already recorded with state %s, now %s", m.Name, order, cur.State, to)
		}
	}
	if to == cur.State {
		return VerdictDuplicate, fmt.Sprintf("%s: already %s", m.Name, to)
	}
	if m.Allowed(cur.State, to) {
		return VerdictApply, ""
	}
	if m.IsTerminal(cur.State) {
		if canaryGuardTerminalExit && !m.IsTerminal(to) {
			return VerdictApply, "" // canary build: terminal → non-terminal allowed
		}
		return illegal, fmt.Sprintf("%s: %s is terminal; %s → %s would leave it", m.Name, cur.State, cur.State, to)
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

// size is an upper bound of the encoded length.
func (g *guardInfo) size() int {
	n := 1 + 10 + 10 + len(g.Reason) + 10
	for i := range g.Transitions {
		t := &g.Transitions[i]
		n += 5*10 + 3*10 + 2 + len(t.Machine) + len(t.Instance) + len(t.From) + len(t.To)
	}
	return n
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
	n := r.uvarint()
	if r.err != nil {
		return ""
	}
	if n > uint64(len(r.b)) {
		r.err = errors.New("pipeline: guard: string longer than input")
		return ""
	}
	s := string(r.b[:n])
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
	if len(b) == 0 {
		return nil
	}
	r := &guardReader{b: b}
	if v := r.byte1(); v != guardVersion {
		return fmt.Errorf("pipeline: guard: unsupported version %d", v)
	}
	g.Attempt = r.uvarint()
	g.Reason = r.str()
	n := r.uvarint()
	if r.err == nil && n > uint64(len(r.b)) {
		return errors.New("pipeline: guard: transition count exceeds input")
	}
	for i := uint64(0); i < n && r.err == nil; i++ {
		var t guardTransition
		t.Machine = r.str()
		t.Instance = r.str()
		t.ExpectRev = r.uvarint()
		t.From = r.str()
		t.FromOrder, t.FromHas = r.opt()
		t.To = r.str()
		t.Order, t.HasOrder = r.opt()
		t.Verdict = Verdict(r.byte1())
		g.Transitions = append(g.Transitions, t)
	}
	if r.err != nil {
		*g = guardInfo{}
		return r.err
	}
	if len(r.b) != 0 {
		*g = guardInfo{}
		return errors.New("pipeline: guard: trailing bytes")
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
}

var _ kv.Checker = (*Checker)(nil)

// NewChecker returns the apply-time guard for a catalog.
func NewChecker(cat ir.Catalog) *Checker { return &Checker{cat: cat} }

// Check re-runs the guard of every transition the command carries against
// the replica's committed state, and checks that the effect writes exactly
// the machine records the verdicts allow. It returns an error (a veto) when
// they disagree.
func (c *Checker) Check(cmd *kv.Command, state kv.Reader) error {
	var tbuf [2]guardTransition
	g := guardInfo{Transitions: tbuf[:0]}
	if err := decodeGuardInto(cmd.Guard, &g); err != nil {
		return err
	}
	var err error
	if Verdict(cmd.Verdict) == VerdictReject {
		if len(cmd.Effect.Writes) != 0 {
			return errors.New("pipeline: guard: a recorded rejection must not write")
		}
		return nil
	}
	illegal := illegalVerdict(ir.Class(cmd.Class))
	var keyBuf [4]string
	keys := keyBuf[:0]
	for i := range g.Transitions {
		t := &g.Transitions[i]
		m, ok := c.cat.Machine(t.Machine)
		if !ok {
			return fmt.Errorf("pipeline: guard: unknown machine %q (schema skew between replicas?)", t.Machine)
		}
		key := MachineKey(t.Machine, t.Instance)
		keys = append(keys, key)
		rec, exists := state.Get(key)
		var cur MachineRecord
		if exists {
			if cur, err = ParseMachineRecord(rec.Value); err != nil {
				return fmt.Errorf("pipeline: guard: %s: %w", key, err)
			}
		}
		v, _ := Decide(m, cur, exists, t.To, t.Order, t.HasOrder, illegal)
		if rec.Rev != t.ExpectRev {
			if v != t.Verdict {
				return fmt.Errorf("%s: %s moved (rev %d, evaluated at %d): verdict now %s, was %s", errGuardMovedText, key, rec.Rev, t.ExpectRev, v, t.Verdict)
			}
		} else if v != t.Verdict {
			return fmt.Errorf("pipeline: guard: %s: verdict %s at apply, %s at evaluation", key, v, t.Verdict)
		}
		if t.Verdict != VerdictApply {
			continue
		}
		var buf [96]byte
		want := nextMachineRecord(t).AppendJSON(buf[:0])
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
			if k == w.Key && g.Transitions[i].Verdict == VerdictApply {
				ok = true
			}
		}
		if !ok {
			return fmt.Errorf("pipeline: guard: effect writes %s without an applying transition", w.Key)
		}
	}
	return nil
}
