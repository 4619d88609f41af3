package main

import (
	"fmt"
	"io"
	"os"
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

// maxKeyFile bounds how much of a key file (or stdin) is read: a base64
// key is at most 44 characters; the rest is room for whitespace.
const maxKeyFile = 4096

// keyringCmd rotates the gossip encryption key on a live cluster:
// install NEW, use NEW, remove OLD. Keys are read from a file or stdin,
// never taken as arguments (every user of the host sees arguments in ps),
// and are shown only as fingerprints.
func (a *app) keyringCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "keyring",
		Short: "List and rotate the gossip encryption keys (install, use, remove)",
		Long: `Rotate the gossip encryption key on a live cluster in three steps, each
reaching every alive node through gossip (any node's API will do):

  writctl keyring install --key-file new.key   # every node accepts the new key too
  writctl keyring use --key-file new.key       # every node encrypts with it
  writctl keyring remove --key-file old.key    # the old key is no longer accepted

A key file holds the base64 of 16, 24 or 32 bytes:
  (umask 077; head -c 32 /dev/urandom | base64 > new.key)
--key-file - reads the key from stdin. Keys are never taken as arguments
(other users see arguments in ps) and never printed: every answer names a
key by its fingerprint, the first 8 bytes of its SHA-256 in hex
(base64 -d new.key | sha256sum | cut -c1-16).
Every step is idempotent: if a node did not answer, rerun it once the node
is back. The key in use (primary) cannot be removed.`,
	}
	op := func(name, short string, o writv1.KeyringRequest_Op, takesKey bool) *cobra.Command {
		var keyFile string
		cmd := &cobra.Command{
			Use:   name,
			Short: short,
			Args: func(_ *cobra.Command, args []string) error {
				if len(args) == 0 {
					return nil
				}
				if !takesKey {
					return fail(exitUsage, "keyring %s takes no arguments", name)
				}
				return fail(exitUsage, "keyring %s takes the key from --key-file FILE (or --key-file - for stdin), not as an argument: arguments are visible to every user in ps", name)
			},
			RunE: func(cmd *cobra.Command, args []string) error {
				// A key query waits for every alive node (and is retried
				// when one is late), so it gets more time than other calls.
				if f := cmd.Flag("timeout"); f != nil && !f.Changed && a.timeout < keyringTimeout {
					a.timeout = keyringTimeout
				}
				req := &writv1.KeyringRequest{Op: o}
				if takesKey {
					k, err := a.readKey(name, keyFile)
					if err != nil {
						return err
					}
					req.Key = k
				}
				c, err := a.dial()
				if err != nil {
					return err
				}
				ctx, cancel := a.ctx()
				defer cancel()
				r, err := c.Keyring(ctx, req)
				if err != nil {
					return a.keyringErr(name, err)
				}
				if a.structured() {
					return a.printJSON(r)
				}
				return renderKeyring(a.out, r)
			},
		}
		if takesKey {
			cmd.Flags().StringVar(&keyFile, "key-file", "", "file holding the base64 key (- reads it from stdin)")
		}
		return cmd
	}
	root.AddCommand(
		op("list", "Show every key's fingerprint, how many nodes hold it and how many encrypt with it", writv1.KeyringRequest_LIST, false),
		op("install", "Add the key in --key-file to every node's keyring (step 1 of a rotation)", writv1.KeyringRequest_INSTALL, true),
		op("use", "Make the installed key in --key-file the one every node encrypts with (step 2)", writv1.KeyringRequest_USE, true),
		op("remove", "Remove the key in --key-file from every node's keyring (step 3; not the key in use)", writv1.KeyringRequest_REMOVE, true),
	)
	return root
}

// readKey reads and checks the key of keyring op from file ("-": stdin).
func (a *app) readKey(op, file string) (string, error) {
	var r io.Reader
	switch file {
	case "":
		return "", fail(exitUsage, "keyring %s needs --key-file FILE (or --key-file - for stdin) holding a base64 key of 16, 24 or 32 bytes: (umask 077; head -c 32 /dev/urandom | base64 > new.key)", op)
	case "-":
		r = a.stdin
	default:
		f, err := os.Open(file)
		if err != nil {
			return "", fail(exitUsage, "keyring %s --key-file: %v", op, err)
		}
		defer f.Close()
		r = f
	}
	b, err := io.ReadAll(io.LimitReader(r, maxKeyFile+1))
	if err != nil {
		return "", fail(exitUsage, "keyring %s --key-file %s: %v", op, file, err)
	}
	if len(b) > maxKeyFile {
		return "", fail(exitUsage, "keyring %s --key-file %s: more than %d bytes: the file must hold one base64 key", op, file, maxKeyFile)
	}
	k := strings.TrimSpace(string(b))
	if err := api.CheckKey(k); err != nil {
		return "", fail(exitUsage, "keyring %s --key-file %s: %v", op, file, err)
	}
	return k, nil
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

// renderKeyring prints a keyring answer for people; keys appear only as
// fingerprints.
func renderKeyring(out io.Writer, r *writv1.KeyringResponse) error {
	key := "key " + r.Fingerprint
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
		fmt.Fprintln(w, "FINGERPRINT\tINSTALLED\tPRIMARY")
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
