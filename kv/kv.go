// Package kv owns writ's replicated data model: keys with revisions, the
// CAS-guarded effects that evaluation produces, the command envelope that the
// log replicates, the per-command results that apply records, and the
// conflict case document (ConflictCase) the pipeline keeps and clients read.
//
// It is the vocabulary shared by pipeline (which builds commands), raftstore
// (which replicates and applies them) and plugins/host (which turns handler
// output into effects). It imports only the standard library so that every
// layer can use it without pulling in any other.
//
// Apply semantics (W7): a command's effect is a list of writes, each with a
// precondition on the key's current revision. Apply checks every
// precondition first; if all hold, all writes apply atomically at the
// command's log index; if any fails, nothing applies and the command is
// recorded as a no-op with StatusConflict and a reason naming the key. This
// decision depends only on committed state, so every replica makes the same
// one.
package kv

//go:generate go tool stringer -type=Status -linecomment -output status_string_gen.go

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
)

// Revision of a key: the log index of the command that last wrote it.
// Zero means the key is absent.

// Write is one key/value mutation guarded by a revision precondition.
type Write struct {
	Key string
	// Value is the new value; ignored when Delete is set.
	Value []byte
	// Delete removes the key instead of writing Value.
	Delete bool
	// IfRev is the precondition: the key's current revision must equal IfRev
	// (0 means the key must be absent). It is ignored when Unconditional is
	// set.
	IfRev uint64
	// Unconditional skips the revision check. Pipeline uses it only for keys
	// it owns whose writes commute (e.g. append-only records keyed by ID).
	Unconditional bool
}

// Effect is the only thing that is replicated for an entry: the writes that
// evaluation produced.
type Effect struct {
	Writes []Write
}

// Record is a key's committed value and revision.
type Record struct {
	Key   string
	Value []byte
	Rev   uint64
}

// Command is one logical entry in the replicated log. Several commands may be
// carried by one log entry (a batch) so that they share an fsync.
type Command struct {
	// ID deduplicates application: a request ID or a fact ID. A second
	// command with an ID that was already applied is recorded as
	// StatusDuplicate and changes nothing. Empty disables deduplication.
	ID string
	// Type is the declared entry type (e.g. "job.submit"), or a system type
	// starting with "writ." for pipeline-internal commands.
	Type string
	// Class is the entry type's class as ir.Class encodes it.
	Class uint8
	// Key is the machine instance key the entry addresses, if any; used for
	// watch filtering only.
	Key string
	// Verdict is the guard decision at evaluation (pipeline-defined codes);
	// replicas re-check it at apply through a Checker.
	Verdict uint8
	// Guard carries what the apply-time check needs (machine, from/to
	// state, order), pipeline-encoded; opaque to the log.
	Guard []byte
	// Effect is applied if every precondition holds.
	Effect Effect
	// Payload is the entry's encoded payload, kept for watch and audit.
	Payload []byte
	// Origin names the node that proposed the command.
	Origin string
}

// Status is what apply decided for one command.
type Status uint8

const (
	// StatusApplied: every precondition held and every write applied.
	StatusApplied Status = 1 // applied
	// StatusDuplicate: the command's ID had already been applied; nothing
	// changed. Result.FirstIndex names the first application.
	StatusDuplicate Status = 2 // duplicate
	// StatusConflict: a revision precondition failed; nothing changed. The
	// proposer re-evaluates against the new state.
	StatusConflict Status = 3 // conflict
	// StatusRejected: the apply-time Checker vetoed the command; nothing
	// changed.
	StatusRejected Status = 4 // rejected
	// StatusFenced: the command's ID is fenced (a TypeFence command for it
	// applied before any command with that ID did): it is recorded as not
	// committed, for good, and nothing changed. Result.FirstIndex names the
	// fence's index. A fence for an ID that already applied is a
	// StatusDuplicate instead.
	StatusFenced Status = 5 // fenced
)

// TypeFence is the type of a fence: a command with no writes that makes
// "not committed" final for its ID. If no command with the ID applied
// before it, apply records the ID as StatusFenced and every later command
// with that ID applies as StatusFenced (changing nothing) on every replica;
// otherwise the fence is a StatusDuplicate and changes nothing.
const TypeFence = "writ.fence"

// PayloadDigest is the digest apply records with a command's outcome: the
// first 8 bytes of the SHA-256 of the payload, big endian, never 0. An
// empty payload has digest 0 (none): it never mismatches.
func PayloadDigest(payload []byte) uint64 {
	if len(payload) == 0 {
		return 0
	}
	sum := sha256.Sum256(payload)
	if d := binary.BigEndian.Uint64(sum[:8]); d != 0 {
		return d
	}
	return 1
}

// Result records the outcome of applying one command.
type Result struct {
	// Index is the log index of the entry that carried the command.
	Index uint64
	// Status is the apply decision.
	Status Status
	// Reason explains a non-applied status (names the key and revisions).
	Reason string
	// FirstIndex is, for a duplicate, the index of the first application;
	// for a fenced command, the index of the fence.
	FirstIndex uint64
	// Digest is the PayloadDigest of the command that recorded the outcome
	// (for a duplicate: of the first application), 0 if none was recorded.
	// A caller compares it with its own command's digest to tell a retry
	// from a reuse of the ID with a different payload.
	Digest uint64
	// Verdict is the Command.Verdict of the command that recorded the
	// outcome (for a duplicate: of the first application).
	Verdict uint8
}

// Reader reads committed state during apply-time checks.
type Reader interface {
	Get(key string) (Record, bool)
}

// Checker re-runs schema guards at apply time on every replica (W8). It must
// be deterministic and read-only: the same command against the same state
// returns the same verdict on every node. A non-nil error vetoes the
// command, which is then recorded with StatusRejected and the error's text
// — unless the error is ErrMoved (errors.Is): then the command was
// evaluated against state that has moved since, and it is recorded as
// StatusConflict, like a failed revision precondition: it changed nothing,
// it is not a decision, and its proposer decides it again.
type Checker interface {
	Check(cmd *Command, state Reader) error
}

// ErrMoved is what a Checker's error matches (errors.Is) when it refuses a
// command because the state it was evaluated against has moved (see
// Checker).
var ErrMoved = errors.New("kv: state moved since the command was evaluated")

// ApplyObserver is told, in log order, about every applied batch after its
// state change is durable on this node. Implementations must not block for
// long: they run on the apply path.
type ApplyObserver interface {
	Applied(index uint64, batch []Command, results []Result)
}

// RestoreObserver is optionally implemented by an ApplyObserver. It is told
// where the state stands whenever it got there without the entries before
// being reported one by one: once when the log opens (the state loaded from
// disk, index 0 for a new node), before any Applied call, and each time the
// node installs a snapshot because it fell too far behind for the log to
// catch it up. Anything derived from the per-entry stream (a watch feed,
// say) has a gap up to index. An observer without it gets no call at open
// and one Applied(index, nil, nil) per snapshot install.
type RestoreObserver interface {
	Restored(index uint64)
}

// Proposal is one proposed batch.
type Proposal interface {
	// Wait blocks until the batch is committed and applied on this node and
	// returns one result per command. If ctx ends first it returns an error
	// wrapping ErrUnknown: the batch may still commit later.
	Wait(ctx context.Context) ([]Result, error)
}

// LogStatus is a snapshot of the replicated log's state on one node.
type LogStatus struct {
	NodeID   string
	LeaderID string // "" when no leader is known
	IsLeader bool
	Term     uint64
	Commit   uint64
	Applied  uint64
}

// Member is one node in the consensus configuration.
type Member struct {
	ID       string
	RaftAddr string
	Voter    bool   // false: learner
	Match    uint64 // leader's view of the member's replicated index (0 if unknown)
	// Incarnation identifies the member's data directory: a node rebuilt
	// under the same ID has a new one (0: not recorded).
	Incarnation uint64
}

var (
	// ErrNoLeader: no leader is known; the proposal was not appended.
	ErrNoLeader = errors.New("kv: no leader")
	// ErrDropped: consensus refused the proposal; it was not appended.
	ErrDropped = errors.New("kv: proposal dropped")
	// ErrUnknown: the proposal was handed to consensus but its outcome is
	// not known yet; it may still commit.
	ErrUnknown = errors.New("kv: outcome unknown")
	// ErrStopped: the log stopped (shutdown or fatal storage error).
	ErrStopped = errors.New("kv: log stopped")
)

// AppliedEntry is one applied batch of commands read back from the retained
// log, with the apply decision of each command as the outcome table records
// it (see raftstore's Node.ReadApplied). A Result with Status 0 means the
// decision is no longer retained.
type AppliedEntry struct {
	Index    uint64
	Commands []Command
	Results  []Result
}
