package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/writ-dev/writ/node/config"
	"github.com/writ-dev/writ/schema/ir"
)

// Option adjusts what Run starts.
type Option func(*Options)

// WithCatalog sets the schema catalog the node runs: a generated one
// (mygen.Catalog()) or a runtime one built from a schema directory.
func WithCatalog(c ir.Catalog) Option { return func(o *Options) { o.Catalog = c } }

// WithLogOutput sends the node's structured logs to w (default os.Stderr).
func WithLogOutput(w io.Writer) Option { return func(o *Options) { o.LogOutput = w } }

// WithPluginSearch names a plugin binary looked up next to the executable,
// then on PATH, when the configuration lists no plugins.
func WithPluginSearch(name string) Option { return func(o *Options) { o.PluginName = name } }

// WithStarted calls f once the node serves, before Run waits.
func WithStarted(f func(*Node)) Option { return func(o *Options) { o.started = f } }

// Run starts a node for cfg and blocks until ctx is done (the node then
// stops without leaving the cluster; use Start and Leave to depart) or the
// node fails. It returns nil after a clean stop, a *StartError when the
// node could not start (nothing is left running), and the fatal error
// otherwise. A dev-mode temporary data directory is removed on return.
func Run(ctx context.Context, cfg *config.Node, opts ...Option) error {
	if cfg == nil {
		return errors.New("node: Run needs a configuration (config.Load)")
	}
	var o Options
	for _, f := range opts {
		f(&o)
	}
	n, err := Start(cfg, o)
	if err != nil {
		return err
	}
	if o.started != nil {
		o.started(n)
	}
	var ferr error
	select {
	case <-ctx.Done():
	case err := <-n.Fatal():
		ferr = fmt.Errorf("node: %w", err)
	}
	n.Stop()
	n.RemoveTemp()
	return ferr
}

// RemoveTemp deletes a dev-mode temporary data directory after Stop or
// Leave; it does nothing for a configured data_dir.
func (n *Node) RemoveTemp() {
	if n.tempDir {
		_ = os.RemoveAll(n.dataDir)
	}
}
