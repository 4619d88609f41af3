package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/writ-dev/writ/raftstore"
)

// recoverCmd is `writd recover`: offline recovery of a node stopped by a
// fatal apply stop (exit 3) at an entry that no build can apply.
func recoverCmd(stdout, stderr io.Writer) *cobra.Command {
	var dataDir string
	var skip uint64
	var yes bool
	cmd := &cobra.Command{
		Use:   "recover --data-dir DIR --skip-index N --yes",
		Short: "Offline: apply the committed entry a fatal apply stop named as an empty entry",
		Long: `recover records, in a stopped node's data directory, that the committed entry
at --skip-index is to be applied as an empty entry (no writes, no outcome).

WARNING: the node's state then differs from every replica that applied that
entry. Run it only when every member stopped at the same entry (run it on
each of them, with the same index), or on a node you rebuild from a healthy
member afterwards. Prefer a build that applies the entry. The node must be
stopped.`,
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(*cobra.Command, []string) error {
			switch {
			case dataDir == "":
				return errors.New("recover: --data-dir is required: the stopped node's data directory")
			case skip == 0:
				return errors.New("recover: --skip-index is required: the index the fatal apply stop named (\"fatal apply stop at index N\")")
			case !yes:
				return fmt.Errorf("recover: skipping entry %d makes this node's state differ from every replica that applied it; pass --yes once every member stopped at it, or if this node is rebuilt afterwards", skip)
			}
			raftDir := filepath.Join(dataDir, "raft")
			if _, err := os.Stat(filepath.Join(raftDir, "state.db")); err != nil {
				return fmt.Errorf("recover: %s is not a writd data directory (no raft/state.db): %w", dataDir, err)
			}
			if err := raftstore.SkipEntry(raftDir, skip); err != nil {
				return fmt.Errorf("recover: %w", err)
			}
			fmt.Fprintf(stdout, "writd recover: the committed entry at index %d will be applied as empty when the node starts\n", skip)
			fmt.Fprintln(stderr, "writd recover: WARNING: this node's state now differs from any replica that applied that entry")
			return nil
		},
	}
	cmd.Flags().StringVar(&dataDir, "data-dir", "", "the stopped node's data directory")
	cmd.Flags().Uint64Var(&skip, "skip-index", 0, "the raft index of the entry to apply as empty")
	cmd.Flags().BoolVar(&yes, "yes", false, "confirm that the state may differ from replicas that applied the entry")
	return cmd
}
