package raftstore

import (
	"context"
	"testing"

	"github.com/writ-dev/writ/internal/depcheck"
	"github.com/writ-dev/writ/kv"
)

// logPort mirrors pipeline.Log (pipeline/ports.go); raftstore must not
// import pipeline, so the method set is repeated here and checked.
type logPort interface {
	Propose(ctx context.Context, batch []kv.Command) (kv.Proposal, error)
	Get(ctx context.Context, key string, linearizable bool) (kv.Record, bool, error)
	List(ctx context.Context, prefix string, linearizable bool) ([]kv.Record, error)
	Outcome(id string) (kv.Result, bool)
	Status() kv.LogStatus
}

// votersPort is the method set the membership reconciler calls.
type votersPort interface {
	IsLeader() bool
	Members() []kv.Member
	AddLearner(ctx context.Context, id, raftAddr string) error
	Promote(ctx context.Context, id string) error
	Remove(ctx context.Context, id string) error
	TransferLeadership(ctx context.Context, toID string) error
}

// incarnationPort mirrors membership.IncarnationVoters.
type incarnationPort interface {
	Incarnation() uint64
	AddLearnerIncarnation(ctx context.Context, id, raftAddr string, incarnation uint64) error
}

var (
	_ logPort         = (*Node)(nil)
	_ votersPort      = (*Node)(nil)
	_ incarnationPort = (*Node)(nil)
	_ kv.Proposal     = (*proposal)(nil)
)

func TestImportRules(t *testing.T) {
	const m = "github.com/writ-dev/writ/"
	depcheck.Forbid(t, m+"raftstore",
		m+"plugins", m+"membership", m+"schema", m+"pipeline", m+"api", m+"cmd",
		"github.com/spf13/viper", "github.com/hashicorp/serf", "github.com/hashicorp/go-plugin", "cuelang.org/go")
}
