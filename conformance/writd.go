package conformance

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/writ-dev/writ/node/config"
)

// buildWritdFromSource lets the suite's own tests, which run inside the
// writ module, build writd with `go build` when no writd binary is found.
// A user's `writ conformance` never builds anything: it runs the stock
// writd next to writ, on PATH, or given with --writd.
var buildWritdFromSource = false

// writdBinary resolves the writd the cluster tier runs: ClusterOptions.Writd,
// else the writd next to the running executable (the writ binary), else the
// first writd on PATH.
func (e *Env) writdBinary(ctx context.Context, scratch string) (string, error) {
	if bin := e.Opts.Cluster.Writd; bin != "" {
		abs, err := filepath.Abs(bin)
		if err != nil {
			return "", fmt.Errorf("conformance: --writd %s: %w", bin, err)
		}
		if st, err := os.Stat(abs); err != nil || st.IsDir() {
			return "", fmt.Errorf("conformance: --writd %s is not a writd binary (fix: give the path of a built writd)", bin)
		}
		return abs, nil
	}
	if buildWritdFromSource {
		// The suite's own tests run this tree's writd, never one that
		// happens to be installed.
		return buildWritd(ctx, scratch)
	}
	if self, err := os.Executable(); err == nil {
		if bin := filepath.Join(filepath.Dir(self), "writd"); isExecutable(bin) {
			return bin, nil
		}
	}
	if bin, err := exec.LookPath("writd"); err == nil {
		return filepath.Abs(bin)
	}
	return "", errors.New("conformance: no writd binary next to writ or on PATH (fix: install writd beside writ, put it on PATH or pass --writd BIN)")
}

// buildWritd builds this module's writd into scratch (the suite's own
// tests only).
func buildWritd(ctx context.Context, scratch string) (string, error) {
	bin := filepath.Join(scratch, "writd")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/writ-dev/writ/cmd/writd")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("conformance: writd could not be built (pass --writd BIN): %v: %s", err, strings.TrimSpace(out.String()))
	}
	return bin, nil
}

func isExecutable(path string) bool {
	st, err := os.Stat(path)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}

// writdArgs are the flags that make a stock writd run the schema under test
// with the plugins under test: the schema directory goes in as --schema (a
// runtime catalog, no generated code in writd) and every plugin as
// --plugin PATH=SHA256, pinned to the binary as it is now, since a
// configured writd does not trust a plugin on first use.
func (e *Env) writdArgs() ([]string, error) {
	dir, err := filepath.Abs(e.Dir)
	if err != nil {
		return nil, fmt.Errorf("conformance: schema %s: %w", e.Dir, err)
	}
	args := []string{"--schema", dir}
	for _, p := range e.Opts.pluginPaths() {
		abs, err := filepath.Abs(p)
		if err != nil {
			return nil, fmt.Errorf("conformance: --plugin %s: %w", p, err)
		}
		pin, err := config.PinPlugin(abs)
		if err != nil {
			return nil, fmt.Errorf("conformance: --plugin %s: %w", p, err)
		}
		args = append(args, "--plugin", pin.String())
	}
	return args, nil
}
