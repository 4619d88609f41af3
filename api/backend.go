package api

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/writ-dev/writ/api/writv1"
	"github.com/writ-dev/writ/kv"
)

// Outcome is what a requester learns (re-exported from the wire enum).
type Outcome = writv1.Outcome

// The four outcomes.
const (
	Committed   = writv1.Outcome_COMMITTED
	Rejected    = writv1.Outcome_REJECTED
	Unavailable = writv1.Outcome_UNAVAILABLE
	Uncertain   = writv1.Outcome_UNCERTAIN
)

// Entry is one operation as the write path receives it. Payload is JSON.
type Entry struct {
	Type    string
	ID      string
	Payload []byte
}

// SubmitResult is the outcome of a request-class entry.
type SubmitResult struct {
	Outcome Outcome
	ID      string
	Index   uint64
	Result  []byte
	Reason  string
	// Field names the payload field a REJECTED reason is about, if any.
	Field string
}

// ReportResult acknowledges a fact as received.
type ReportResult struct {
	ID          string
	OutboxDepth uint64
}

// DeliverResult acknowledges a receipt as received.
type DeliverResult struct {
	ID      string
	ItemIDs []string
}

// OutcomeResult is the recorded result of a request or fact ID.
type OutcomeResult struct {
	Outcome Outcome
	Index   uint64
	Status  string
	Reason  string
}

// WatchFilter selects committed outcomes.
type WatchFilter struct {
	From  uint64
	Types []string
	Key   string
}

// WatchEvent is one committed outcome.
type WatchEvent struct {
	Index  uint64
	Type   string
	Class  string
	Key    string
	ID     string
	Status string
	Reason string
}

// OutboxFact is one fact waiting in the outbox.
type OutboxFact struct {
	ID       string
	Type     string
	Age      time.Duration
	Attempts uint32
}

// OutboxInfo describes this node's fact outbox.
type OutboxInfo struct {
	Depth     uint64
	OldestAge time.Duration
	Facts     []OutboxFact
}

// ConfigState is the committed (activated) cluster configuration.
type ConfigState struct {
	Tag      string
	Document []byte
	Index    uint64
}

// ConfigChange is a configuration upgrade request.
type ConfigChange struct {
	ID       string
	Document []byte
	Format   string
	Timeout  time.Duration
}

// ConfigPhase is a step of a configuration upgrade.
type ConfigPhase = writv1.ConfigProgress_Phase

// ConfigProgress reports one phase of an upgrade.
type ConfigProgress struct {
	Phase           ConfigPhase
	Message         string
	Tag             string
	CommittedBy     uint32
	Of              uint32
	RestartRequired []string
	Outcome         Outcome
	Index           uint64
}

// Writer is what the API needs from the node's write path.
type Writer interface {
	Submit(ctx context.Context, e Entry, timeout time.Duration) SubmitResult
	// Report returns only after the fact is durable in this node's outbox.
	Report(ctx context.Context, e Entry) (ReportResult, error)
	Deliver(ctx context.Context, e Entry) (DeliverResult, error)
	Outcome(ctx context.Context, id string) (OutcomeResult, bool, error)
	// Watch calls send for every committed outcome matching f, in log
	// order, until ctx ends or send fails.
	Watch(ctx context.Context, f WatchFilter, send func(WatchEvent) error) error
	Conflicts(ctx context.Context) ([]kv.Record, error)
	Outbox(ctx context.Context) (OutboxInfo, error)
	ConfigShow(ctx context.Context) (ConfigState, error)
	// ConfigUpgrade blocks until the change definitely activated or
	// definitely will not, calling progress at each phase; the returned
	// progress is the final one (ACTIVATED/RELOADED or FAILED).
	ConfigUpgrade(ctx context.Context, c ConfigChange, progress func(ConfigProgress)) (ConfigProgress, error)
}

// Store reads applied state (implemented by the replicated log).
type Store interface {
	Get(ctx context.Context, key string, linearizable bool) (kv.Record, bool, error)
	List(ctx context.Context, prefix string, linearizable bool) ([]kv.Record, error)
}

// NodeStatus is this node's view of itself and the cluster.
type NodeStatus struct {
	Log             kv.LogStatus
	Ready           bool
	NotReadyReason  string
	Health          string
	APIAddr         string
	LeaderAPI       string
	RaftAddr        string
	GossipAddr      string
	Fingerprint     string
	ConfigTag       string
	OutboxDepth     uint64
	OpenConflicts   uint64
	Version         string
	RestartRequired []string
}

// MemberInfo is one node as gossip and consensus see it.
type MemberInfo struct {
	ID          string
	RaftAddr    string
	APIAddr     string
	GossipAddr  string
	Role        string
	Status      string
	Match       uint64
	Leader      bool
	Fingerprint string
}

// PluginInfo describes one handler plugin process.
type PluginInfo struct {
	Name     string
	Path     string
	State    string
	Types    []string
	SHA256   string
	Restarts uint32
}

// Info is the node's self and cluster view.
type Info interface {
	Status(ctx context.Context) NodeStatus
	Members(ctx context.Context) []MemberInfo
	Plugins(ctx context.Context) []PluginInfo
}

// Error is a write-path failure carrying a writ outcome. Backends return it
// (or wrap it) so the API can map it to a gRPC status with a detail.
type Error struct {
	Outcome   Outcome
	ID        string
	Reason    string
	Field     string
	LeaderAPI string
}

func (e *Error) Error() string {
	return fmt.Sprintf("api: %s: %s", e.Outcome, e.Reason)
}

// AsError returns the *Error inside err, if any.
func AsError(err error) (*Error, bool) {
	var e *Error
	ok := errors.As(err, &e)
	return e, ok
}
