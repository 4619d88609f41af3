package robustness

import (
	"sync"
	"time"

	"github.com/writ-dev/writ/api"
)

// Outcomes an Op can record, besides the API's four.
const (
	outReceived = "RECEIVED" // a fact acknowledged as received
	outOK       = "OK"       // a read that answered
	outError    = "ERROR"    // no answer: transport failure or deadline (unknown outcome)
	outFailed   = "FAILED"   // a config change the node said did not activate
)

// Op is one client call: what was asked of which node, when (nanoseconds
// since the run's monotonic base) and what came back.
type Op struct {
	Client  int    `json:"client"`
	Node    string `json:"node"`
	Kind    string `json:"kind"` // submit, reuse (a committed ID, another payload), report, deliver (a receipt), get (linearizable), sget (serializable), config
	Type    string `json:"type,omitempty"`
	ID      string `json:"id,omitempty"`  // request ID or fact ID
	Key     string `json:"key,omitempty"` // the machine key addressed or read
	Payload string `json:"payload,omitempty"`
	Start   int64  `json:"start"`
	End     int64  `json:"end"`
	Outcome string `json:"outcome"`
	Index   uint64 `json:"index,omitempty"`
	Found   bool   `json:"found,omitempty"`
	Rev     uint64 `json:"rev,omitempty"`
	Value   string `json:"value,omitempty"` // the record a read found (a machine record)
	Reason  string `json:"reason,omitempty"`
	// Items are a received receipt's items, as its acknowledgement named them.
	Items []Item `json:"items,omitempty"`
}

// answerErr records a call that ended in err: the outcome (and index) the
// API's error carries, or ERROR (no answer) when it carries none.
func (op *Op) answerErr(err error) {
	if od, ok := api.OutcomeFromError(err); ok {
		op.Outcome, op.Index, op.Reason = od.Outcome.String(), od.Index, od.Reason
		return
	}
	op.Outcome, op.Reason = outError, err.Error()
}

// History records every call on one monotonic base.
type History struct {
	base time.Time
	mu   sync.Mutex
	ops  []Op
}

func newHistory() *History { return &History{base: time.Now()} }

// now is the monotonic time since the base.
func (h *History) now() int64 { return int64(time.Since(h.base)) }

func (h *History) add(op Op) {
	h.mu.Lock()
	h.ops = append(h.ops, op)
	h.mu.Unlock()
}

// Ops is a copy of the recorded calls.
func (h *History) Ops() []Op {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Op(nil), h.ops...)
}
