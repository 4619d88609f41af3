package sim

import (
	"os/exec"
	"slices"
	"strings"
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

// TestNotLinkedIntoBinaries: no package of the module but this one's
// tests imports the simulation, so randhook.go (which swaps
// crypto/rand.Reader while a world runs) is never linked into writd,
// writctl or any other binary.
func TestNotLinkedIntoBinaries(t *testing.T) {
	const self = "github.com/writ-dev/writ/robustness/sim"
	out, err := exec.Command("go", "list", "-e", "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}", "github.com/writ-dev/writ/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) < 10 {
		t.Fatalf("go list listed %d packages, too few to check:\n%s", len(lines), out)
	}
	for _, l := range lines {
		f := strings.Fields(l)
		if len(f) > 0 && f[0] != self && slices.Contains(f[1:], self) {
			t.Errorf("%s imports %s: the simulation (and its crypto/rand.Reader hook) must be imported only by its own tests", f[0], self)
		}
	}
}
