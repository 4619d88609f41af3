package sim

import (
	"testing"

	"github.com/writ-dev/writ/internal/depcheck"
)

// TestImportRules: the simulation drives etcd raft and the pipeline
// itself; it links no real storage, transport or node runtime (no
// raftstore, bbolt, etcd's wal, gRPC, membership or cmd), so that nothing
// in a run touches a real disk, socket or clock.
func TestImportRules(t *testing.T) {
	depcheck.Forbid(t, "github.com/writ-dev/writ/robustness/sim",
		"github.com/writ-dev/writ/raftstore", "github.com/writ-dev/writ/membership", "github.com/writ-dev/writ/cmd",
		"github.com/writ-dev/writ/node", "go.etcd.io/bbolt", "go.etcd.io/etcd", "google.golang.org/grpc", "net/http")
}
