package node_test

import (
	"context"
	"fmt"

	"github.com/writ-dev/writ/node"
	"github.com/writ-dev/writ/node/config"
	"github.com/writ-dev/writ/node/schemadir"
)

// Run a node for a catalog in a few lines. A program with a generated
// catalog passes node.WithCatalog(mygen.Catalog()); this one builds a
// runtime catalog from a schema directory (as writd --schema does) whose
// only type is a config type, so it needs no handler plugin. The
// configuration is what writd reads: a file, WRIT_* variables, flags.
func Example() {
	cat, _, err := schemadir.Load("testdata/flags")
	if err != nil {
		fmt.Println(err)
		return
	}
	cfg, err := config.Load(config.Options{Env: []string{
		"WRIT_API_ADDR=127.0.16.50:0", "WRIT_RAFT_ADDR=127.0.16.50:7071", "WRIT_GOSSIP_ADDR=127.0.16.50:7072",
	}})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, stop := context.WithCancel(context.Background())
	err = node.Run(ctx, cfg,
		node.WithCatalog(cat),
		node.WithLogOutput(discard{}),
		node.WithStarted(func(n *node.Node) {
			fmt.Println("serving", n.APIAddr() != "", "temporary data dir:", n.TempDir())
			stop() // a real program stops on a signal instead
		}))
	fmt.Println("stopped:", err)
	// Output:
	// serving true temporary data dir: true
	// stopped: <nil>
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
