package main

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/api/writv1"
)

// keyringTimeout is the default deadline of a keyring call (--timeout
// overrides it).
const keyringTimeout = 30 * time.Second

// keyringCmd rotates the gossip encryption key on a live cluster:
// install NEW, use NEW, remove OLD.
func (a *app) keyringCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "keyring",
		Short: "List and rotate the gossip encryption keys (install, use, remove)",
		Long: `Rotate the gossip encryption key on a live cluster in three steps, each
reaching every alive node through gossip (any node's API will do):

  writctl keyring install NEWKEY   # every node accepts NEWKEY too
  writctl keyring use NEWKEY       # every node encrypts with NEWKEY
  writctl keyring remove OLDKEY    # OLDKEY no longer accepted

Keys are base64 of 16, 24 or 32 bytes: head -c 32 /dev/urandom | base64.
Every step is idempotent: if a node did not answer, rerun it once the node
is back. The key in use (primary) cannot be removed.`,
	}
	op := func(use, short string, o writv1.KeyringRequest_Op, nargs int) *cobra.Command {
		return &cobra.Command{
			Use:   use,
			Short: short,
			Args: func(_ *cobra.Command, args []string) error {
				if len(args) != nargs {
					if nargs == 0 {
						return fail(exitUsage, "keyring %s takes no arguments", strings.Fields(use)[0])
					}
					return fail(exitUsage, "keyring %s needs exactly one KEY argument: a base64 key of 16, 24 or 32 bytes (head -c 32 /dev/urandom | base64)", strings.Fields(use)[0])
				}
				return nil
			},
			RunE: func(cmd *cobra.Command, args []string) error {
				// A key query waits for every alive node (and is retried
				// when one is late), so it gets more time than other calls.
				if f := cmd.Flag("timeout"); f != nil && !f.Changed && a.timeout < keyringTimeout {
					a.timeout = keyringTimeout
				}
				req := &writv1.KeyringRequest{Op: o}
				if nargs == 1 {
					req.Key = strings.TrimSpace(args[0])
					if err := api.CheckKey(req.Key); err != nil {
						return fail(exitUsage, "keyring %s KEY: %v", strings.Fields(use)[0], err)
					}
				}
				c, err := a.dial()
				if err != nil {
					return err
				}
				ctx, cancel := a.ctx()
				defer cancel()
				r, err := c.Keyring(ctx, req)
				if err != nil {
					return a.keyringErr(strings.Fields(use)[0], err)
				}
				if a.structured() {
					return a.printJSON(r)
				}
				return renderKeyring(a.out, r, req.Key)
			},
		}
	}
	root.AddCommand(
		op("list", "Show every key, how many nodes hold it and how many encrypt with it", writv1.KeyringRequest_LIST, 0),
		op("install KEY", "Add KEY to every node's keyring (step 1 of a rotation)", writv1.KeyringRequest_INSTALL, 1),
		op("use KEY", "Make the installed KEY the one every node encrypts with (step 2)", writv1.KeyringRequest_USE, 1),
		op("remove KEY", "Remove KEY from every node's keyring (step 3; not the key in use)", writv1.KeyringRequest_REMOVE, 1),
	)
	return root
}

func (a *app) keyringErr(op string, err error) error {
	st, _ := status.FromError(err)
	switch st.Code() {
	case codes.InvalidArgument:
		return fail(exitUsage, "keyring %s: %s", op, st.Message())
	case codes.FailedPrecondition, codes.Aborted:
		return fail(exitError, "keyring %s: %s", op, st.Message())
	case codes.Unimplemented:
		return fail(exitError, "keyring %s: the writd at %s does not support keyring operations: upgrade it", op, a.addr)
	}
	return a.rpcErr(err)
}

// renderKeyring prints a keyring answer for people.
func renderKeyring(out io.Writer, r *writv1.KeyringResponse, key string) error {
	switch r.Op {
	case writv1.KeyringRequest_INSTALL:
		fmt.Fprintf(out, "installed %s on %d of %d nodes\n", key, r.NumResp, r.NumNodes)
	case writv1.KeyringRequest_USE:
		fmt.Fprintf(out, "%s is now the primary key on %d of %d nodes\n", key, r.NumResp, r.NumNodes)
	case writv1.KeyringRequest_REMOVE:
		fmt.Fprintf(out, "removed %s on %d of %d nodes\n", key, r.NumResp, r.NumNodes)
	default:
		fmt.Fprintf(out, "%d of %d nodes answered\n", r.NumResp, r.NumNodes)
		keys := make([]string, 0, len(r.Keys))
		for k := range r.Keys {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		w := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
		fmt.Fprintln(w, "KEY\tINSTALLED\tPRIMARY")
		for _, k := range keys {
			fmt.Fprintf(w, "%s\t%d/%d\t%d/%d\n", k, r.Keys[k], r.NumNodes, r.PrimaryKeys[k], r.NumNodes)
		}
		if err := w.Flush(); err != nil {
			return err
		}
	}
	if r.NumErr > 0 || len(r.Messages) > 0 {
		ids := make([]string, 0, len(r.Messages))
		for id := range r.Messages {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		for _, id := range ids {
			fmt.Fprintf(out, "  %s: %s\n", id, r.Messages[id])
		}
	}
	return nil
}
