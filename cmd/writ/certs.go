package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/writ-dev/writ/pki"
)

// certsCmd makes a development CA and the certificates it issues (pki).
func (c *cli) certsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "certs",
		Short: "make a development CA and node or client certificates (see docs/security.md)",
		Long: `Make a development certificate authority and the node and client
certificates it issues. Files are written 0600 in directories 0700; an
existing key is never replaced.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return &usageErr{err: errNoSubcommand, path: cmd.CommandPath()}
		},
	}
	cmd.AddCommand(c.certsInitCmd(), c.certsIssueCmd("node"), c.certsIssueCmd("client"))
	return cmd
}

func (c *cli) certsInitCmd() *cobra.Command {
	var dir, name string
	cmd := &cobra.Command{
		Use:   "init [--dir DIR] [--name CLUSTER]",
		Short: "make a development CA: DIR/ca.crt and DIR/ca.key (default DIR certs)",
		Args:  noArgsFix("writ certs init [--dir DIR] [--name CLUSTER]"),
		Run: func(*cobra.Command, []string) {
			f, err := pki.NewCA(dir, name)
			if err != nil {
				fmt.Fprintf(c.errw, "writ certs init: %v\n", err)
				c.code = 1
				return
			}
			fmt.Fprintf(c.out, "writ certs: wrote %s and %s (keep the key offline outside development)\n", f.Cert, f.Key)
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "certs", "directory of the CA")
	cmd.Flags().StringVar(&name, "name", "writ", "cluster name, in the CA's subject")
	return cmd
}

// certsIssueCmd is "certs node ID" or "certs client NAME": a certificate
// issued by the CA for a node (with the hosts it is reached at) or a
// client (with role hints).
func (c *cli) certsIssueCmd(sub string) *cobra.Command {
	var ca, out string
	var list listFlag
	what, short := "ID", "issue node ID's peer certificate (identity spiffe://writ/node/ID; hosts: the IPs and DNS names it listens on, default 127.0.0.1,localhost)"
	if sub == "client" {
		what, short = "NAME", "issue a client certificate (identity spiffe://writ/client/NAME, roles as hints, e.g. read, write, operator)"
	}
	cmd := &cobra.Command{
		Use:   sub + " " + what + " [--ca DIR] [--out DIR] [--" + map[string]string{"node": "host HOST", "client": "role ROLE"}[sub] + "]...",
		Short: short,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return fmt.Errorf("want exactly one %s (fix: writ certs %s %s [--ca DIR] [--out DIR])", what, sub, what)
			}
			return nil
		},
		Run: func(_ *cobra.Command, args []string) {
			if out == "" {
				out = ca
			}
			var f pki.Files
			var err error
			if sub == "node" {
				hosts := []string(list)
				if len(hosts) == 0 {
					hosts = []string{"127.0.0.1", "localhost"}
				}
				f, err = pki.IssueNode(ca, out, args[0], hosts)
			} else {
				f, err = pki.IssueClient(ca, out, args[0], list)
			}
			if err != nil {
				fmt.Fprintf(c.errw, "writ certs %s: %v\n", sub, err)
				c.code = 1
				return
			}
			fmt.Fprintf(c.out, "writ certs: wrote %s and %s (CA %s)\n", f.Cert, f.Key, f.CA)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&ca, "ca", "certs", "directory of the CA (from writ certs init)")
	fl.StringVar(&out, "out", "", "directory to write "+what+".crt and "+what+".key to (default: the CA directory)")
	if sub == "node" {
		fl.Var(&list, "host", "IP or DNS name the node is reached at (repeatable or comma-separated; default 127.0.0.1,localhost)")
	} else {
		fl.Var(&list, "role", "role hint (repeatable or comma-separated)")
	}
	return cmd
}

// listFlag is a repeatable, comma-separated string flag: each value is
// split at commas, trimmed, and empty parts dropped.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(s string) error {
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			*l = append(*l, v)
		}
	}
	return nil
}

// Type names the flag's value in help (pflag.Value).
func (l *listFlag) Type() string { return "strings" }
