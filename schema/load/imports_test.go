package load_test

import (
	"testing"

	"github.com/writ-dev/writ/internal/depcheck"
)

func TestImportRules(t *testing.T) {
	depcheck.Forbid(t, "github.com/writ-dev/writ/schema/load",
		"github.com/writ-dev/writ/pipeline", "github.com/writ-dev/writ/raftstore", "github.com/writ-dev/writ/membership", "github.com/writ-dev/writ/plugins", "github.com/writ-dev/writ/api",
		"go.etcd.io", "github.com/hashicorp", "google.golang.org/grpc", "github.com/spf13")
}
