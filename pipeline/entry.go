package pipeline

import (
	"sync/atomic"
	"time"

	"github.com/writ-dev/writ/kv"
	"github.com/writ-dev/writ/schema/ir"
)

type kind uint8

const (
	kindRequest kind = iota + 1
	kindFact
	kindConfig
)

type cfgPhase uint8

const (
	phaseStage cfgPhase = iota
	phaseActivate
	phaseAbort
)

// entry is one operation moving through the stages.
type entry struct {
	desc    *ir.TypeDesc
	typ     string
	cmdID   string
	userID  string
	payload ir.Payload
	json    []byte
	machine *ir.Machine
	inst    string
	mkey    string
	keys    []string
	keyBuf  [3]string // backs keys when they fit

	tm     *reqTiming // stage times of a request (only when measured)
	waited bool       // has waited for a key latch (counted once)

	deadline  time.Duration // since Pipeline.epoch (see deadlineAt); 0: none (facts)
	attempt   uint64
	conflicts int32
	gen       uint32 // Pipeline.leaderGen when the request was last proposed
	// answered is set (after done is closed) once replied is: Done reads
	// done without the lock from then on.
	answered atomic.Bool
	t        *entryTiming // backoff and re-proposal times (facts, config, retries)

	kind        kind
	class       ir.Class
	rounds      uint8 // NeedKeys rounds
	verdict     Verdict
	phase       cfgPhase
	proposed    bool
	everApplied bool
	// mayCommit: a proposal of this request made under an earlier leader
	// may still be in the log (it was requeued at a leader change, or its
	// re-proposal failed): it is never answered "not appended".
	mayCommit   bool
	held        bool
	queued      bool
	finished    bool
	replied     bool
	receiptItem bool
	// inFlush: the entry is being evaluated outside the lock; completion
	// and timeouts that arrive meanwhile are deferred to the end of the
	// flush (late, timeoutWhy).
	inFlush bool

	x *entryExtra // rarely needed fields

	provisional kv.Effect
	result      []byte

	done chan struct{} // made on first use (doneLocked)
	out  Outcome
	h    Handle

	evaluation // scratch for one flush
}

// evaluation is an entry's hand-off from evaluate to propose, valid during
// one flush: the plan, the command carrying the entry's effect and guard
// (cmd, for planPropose) or the outcome to finish with (planOut), and the
// state it was evaluated on.
type evaluation struct {
	plan    plan
	planOut *Outcome
	cmd     *kv.Command // into the flush's command arena
	state   []kv.Record
}

// entryExtra holds the fields only some entries use.
type entryExtra struct {
	resolve    string // conflict key to resolve (ResolveConflict)
	note       string
	resolution *Resolution // audit record of a ResolveConflictAs
	recordOnly string      // receipt item rejection to record in the log
	altID      string      // command ID proposed when it differs from cmdID
	// An application (late) or a timeout (timeoutWhy) that arrived while
	// the entry was in a flush, handled when the flush ends.
	late       *lateResult
	timeoutWhy string
	// hookWait is an activation's apply result parked until the reload
	// hook for its index has run here (reload.go).
	hookWait *lateResult
}

// entryTiming holds an entry's backoff and re-proposal bookkeeping: facts
// and config decisions always have it, requests only once they back off.
type entryTiming struct {
	notBefore  time.Time
	proposedAt time.Time
	backoff    time.Duration
	proposals  uint32 // proposals of this entry since the node started
}

func (e *entry) timing() *entryTiming {
	if e.t == nil {
		e.t = &entryTiming{}
	}
	return e.t
}

// notBefore is when a backing-off entry may be evaluated again.
func (e *entry) notBefore() time.Time {
	if e.t == nil {
		return time.Time{}
	}
	return e.t.notBefore
}

func (e *entry) extra() *entryExtra {
	if e.x == nil {
		e.x = &entryExtra{}
	}
	return e.x
}

func (e *entry) resolveKey() string {
	if e.x == nil {
		return ""
	}
	return e.x.resolve
}

func (e *entry) recordOnly() string {
	if e.x == nil {
		return ""
	}
	return e.x.recordOnly
}

func (e *entry) altID() string {
	if e.x == nil {
		return ""
	}
	return e.x.altID
}

// lateResult is an application that arrived while the entry was in a
// flush.
type lateResult struct {
	cmd kv.Command
	res kv.Result
}

// ownScratch is an entry's own transition as guarded before evaluation.
type ownScratch struct {
	t  guardTransition
	ok bool
}

type plan uint8

const (
	planNone plan = iota
	planPropose
	planFinish   // finish with planOut now
	planRetry    // transient failure: back off (facts) / UNAVAILABLE (requests)
	planRequeue  // evaluate again now (more keys, config phase change)
	planIdentity // already applied: finish as duplicate
)

// enqueueLocked adds e to the evaluation queue (front when urgent).
func (p *Pipeline) enqueueLocked(e *entry, front bool) {
	if e.queued || e.finished {
		return
	}
	e.queued = true
	p.live[e.cmdID] = e
	if front {
		p.queue = append(p.queue, nil)
		copy(p.queue[1:], p.queue)
		p.queue[0] = e
	} else {
		p.queue = append(p.queue, e)
	}
}

func (e *entry) stateOf(key string) (kv.Record, bool) {
	for _, r := range e.state {
		if r.Key == key {
			return r, true
		}
	}
	return kv.Record{}, false
}
