package robustness

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

// Binaries are the programs a run starts: writd and the handler plugins
// its nodes load.
type Binaries struct {
	Writd   string
	Plugins []string
}

var (
	buildMu sync.Mutex
	built   = map[string]string{}
)

// Build compiles a package of this module into dir with the given build
// tags (comma-separated, "" for none), once per process for each
// (package, tags) pair.
func Build(ctx context.Context, dir, pkg, tags string) (string, error) {
	buildMu.Lock()
	defer buildMu.Unlock()
	key := pkg + "|" + tags
	if bin, ok := built[key]; ok {
		return bin, nil
	}
	name := filepath.Base(pkg)
	if tags != "" {
		name += "-" + strings.ReplaceAll(tags, ",", "-")
	}
	bin := filepath.Join(dir, name)
	args := []string{"build", "-o", bin}
	if tags != "" {
		args = append(args, "-tags", tags)
	}
	cmd := exec.CommandContext(ctx, "go", append(args, pkg)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("robustness: go build %s (tags %q): %w: %s", pkg, tags, err, strings.TrimSpace(out.String()))
	}
	built[key] = bin
	return bin, nil
}
