package node_test

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"

	"github.com/writ-dev/writ/internal/depcheck"
)

// TestImportRules: node links no CUE (a program embedding a generated
// catalog must not pay for the evaluator; node/schemadir is the opt-in) and
// no command; node/config imports no runtime package, so writctl validates
// documents with writd's own rules without linking a node.
func TestImportRules(t *testing.T) {
	depcheck.Forbid(t, "github.com/writ-dev/writ/node",
		"cuelang.org", "github.com/writ-dev/writ/schema/load", "github.com/writ-dev/writ/node/schemadir", "github.com/writ-dev/writ/cmd")
	depcheck.Forbid(t, "github.com/writ-dev/writ/node/config",
		"github.com/writ-dev/writ/pipeline", "github.com/writ-dev/writ/raftstore", "github.com/writ-dev/writ/membership",
		"github.com/writ-dev/writ/plugins", "github.com/writ-dev/writ/api", "github.com/writ-dev/writ/schema", "go.etcd.io", "cuelang.org")
	depcheck.Forbid(t, "github.com/writ-dev/writ/node/schemadir",
		"github.com/writ-dev/writ/pipeline", "github.com/writ-dev/writ/raftstore", "github.com/writ-dev/writ/membership",
		"github.com/writ-dev/writ/plugins", "github.com/writ-dev/writ/api", "github.com/spf13")
}

// TestOnlyNodeConfigReadsViper: of the module's packages only node/config
// imports viper directly.
func TestOnlyNodeConfigReadsViper(t *testing.T) {
	cmd := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, "github.com/writ-dev/writ/...")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("go list: %v: %s", err, errb.String())
	}
	readers := 0
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		f := strings.Fields(line)
		for _, imp := range f[1:] {
			if imp == "github.com/spf13/viper" {
				if f[0] != "github.com/writ-dev/writ/node/config" {
					t.Errorf("%s imports viper; only node/config may read configuration", f[0])
				}
				readers++
			}
		}
	}
	if readers != 1 {
		t.Errorf("%d packages import viper, want exactly node/config", readers)
	}
}
