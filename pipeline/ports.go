package pipeline

import (
	"context"
	"time"

	"github.com/writ-dev/writ/kv"
)

// The pipeline talks to the rest of the node only through the small
// interfaces in this file. raftstore implements Log, plugins/host implements
// Evaluator; pipelinetest provides single-goroutine fakes of both.

// Log is the replicated log as the pipeline needs it.
type Log interface {
	// Propose hands a batch of commands to consensus as one log entry. A nil
	// error means only "accepted for replication"; use Proposal.Wait for the
	// outcome. Errors wrapping kv.ErrNoLeader or kv.ErrDropped mean the batch was
	// definitely not appended.
	Propose(ctx context.Context, batch []kv.Command) (kv.Proposal, error)
	// Get reads a key from this node's applied state (serializable). With
	// linearizable set it first confirms the read index with a quorum.
	Get(ctx context.Context, key string, linearizable bool) (kv.Record, bool, error)
	// List reads every key with the prefix, in key order.
	List(ctx context.Context, prefix string, linearizable bool) ([]kv.Record, error)
	// Outcome returns the recorded result for a command ID, if retained.
	Outcome(id string) (kv.Result, bool)
	// Status reports leadership and progress.
	Status() kv.LogStatus
}

// ReadBarrier is optionally implemented by a Log that can confirm a read
// index with a quorum: after ReadBarrier returns nil, this node's applied
// state (and Outcome) reflects every entry committed before the call. The
// pipeline's linearizable outcome lookup uses it; without it, the lookup
// reads this node's applied state as it is.
type ReadBarrier interface {
	ReadBarrier(ctx context.Context) error
}

// StateReader is optionally implemented by a Log that reads several keys of
// its applied state in one step (one lock, one read transaction). The
// pipeline reads the keys an entry touches with it when it is available.
type StateReader interface {
	// GetMany sets dst[i] to the record of keys[i] in this node's applied
	// state (serializable, as Get with linearizable=false); an absent key
	// gets kv.Record{Key: keys[i]}. len(dst) == len(keys).
	GetMany(ctx context.Context, keys []string, dst []kv.Record) error
}

// EvalItem is one entry handed to the domain handler for evaluation, with the
// current committed value and revision of every key it touches.
type EvalItem struct {
	Type    string
	ID      string
	Payload []byte // JSON encoding of the validated payload
	State   []kv.Record
}

// EvalErrorKind classifies a handler failure.
type EvalErrorKind uint8

const (
	// EvalRule: a domain rule refused the entry (→ REJECTED for requests).
	EvalRule EvalErrorKind = 1
	// EvalValidation: the handler found the payload invalid (→ REJECTED).
	EvalValidation EvalErrorKind = 2
	// EvalInternal: the handler failed (panic, malformed effect).
	EvalInternal EvalErrorKind = 3
	// EvalUnavailable: no handler could be reached (→ UNAVAILABLE).
	EvalUnavailable EvalErrorKind = 4
)

// EvalError is a typed handler failure for one item.
type EvalError struct {
	Kind EvalErrorKind
	Msg  string
}

func (e *EvalError) Error() string { return "pipeline: handler: " + e.Msg }

// EvalResult is the handler's answer for one item: either an effect (plus an
// optional result document returned to the requester and implied
// transitions of other machine instances), a request for more keys
// (evaluation is repeated with those keys' state added; no callbacks), or an
// error.
type EvalResult struct {
	Effect   kv.Effect
	Result   []byte
	NeedKeys []string
	// Transitions are machine transitions on other instances that the
	// effect implies (e.g. a worker's death requeues its running jobs).
	// The pipeline guards each one like the entry's own transition.
	Transitions []Transition
	Err         *EvalError
}

// Transition is a state change of one machine instance.
type Transition struct {
	Machine string
	Key     string
	To      string
}

// Evaluator runs domain handlers. One call carries many items; results are
// positional.
type Evaluator interface {
	Evaluate(ctx context.Context, items []EvalItem) ([]EvalResult, error)
}

// Clock is the pipeline's time source; pipelinetest supplies a fake.
type Clock interface {
	Now() time.Time
	// After returns a channel that receives once d has elapsed.
	After(d time.Duration) <-chan time.Time
}
