package main

import (
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/writ-dev/writ/pki"
)

const certsUsage = `usage:
  writ certs init   [--dir DIR] [--name CLUSTER]
         make a development CA: DIR/ca.crt and DIR/ca.key (default DIR certs)
  writ certs node   ID [--ca DIR] [--out DIR] [--host HOST]...
         issue node ID's peer certificate (identity spiffe://writ/node/ID;
         hosts: the IPs and DNS names it listens on, default 127.0.0.1,localhost)
  writ certs client NAME [--ca DIR] [--out DIR] [--role ROLE]...
         issue a client certificate (identity spiffe://writ/client/NAME,
         roles as hints, e.g. read, write, operator)
files are written 0600 in directories 0700; an existing key is never replaced
`

// cmdCerts makes a development CA and the certificates it issues (pki).
func cmdCerts(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, certsUsage)
		return 2
	}
	sub, args := args[0], args[1:]
	fl := flag.NewFlagSet("writ certs "+sub, flag.ContinueOnError)
	fl.SetOutput(stderr)
	fl.Usage = func() { fmt.Fprint(stderr, certsUsage) }
	var list listFlag
	switch sub {
	case "init":
		dir := fl.String("dir", "certs", "directory of the CA")
		name := fl.String("name", "writ", "cluster name, in the CA's subject")
		if fl.Parse(args) != nil {
			return 2
		}
		if fl.NArg() > 0 {
			fmt.Fprintf(stderr, "writ certs init: unexpected argument %q (fix: writ certs init [--dir DIR] [--name CLUSTER])\n", fl.Arg(0))
			return 2
		}
		f, err := pki.NewCA(*dir, *name)
		if err != nil {
			fmt.Fprintf(stderr, "writ certs init: %v\n", err)
			return 1
		}
		fmt.Fprintf(stdout, "writ certs: wrote %s and %s (keep the key offline outside development)\n", f.Cert, f.Key)
		return 0
	case "node", "client":
		ca := fl.String("ca", "certs", "directory of the CA (from writ certs init)")
		out := fl.String("out", "", "directory to write ID.crt and ID.key to (default: the CA directory)")
		if sub == "node" {
			fl.Var(&list, "host", "IP or DNS name the node is reached at (repeatable or comma-separated; default 127.0.0.1,localhost)")
		} else {
			fl.Var(&list, "role", "role hint (repeatable or comma-separated)")
		}
		name, rest := "", args
		if len(rest) > 0 && !strings.HasPrefix(rest[0], "-") {
			name, rest = rest[0], rest[1:]
		}
		if fl.Parse(rest) != nil {
			return 2
		}
		if name == "" && fl.NArg() > 0 {
			name = fl.Arg(0)
			if fl.Parse(fl.Args()[1:]) != nil {
				return 2
			}
		}
		what := map[string]string{"node": "ID", "client": "NAME"}[sub]
		if name == "" || fl.NArg() > 0 {
			fmt.Fprintf(stderr, "writ certs %s: want exactly one %s (fix: writ certs %s %s [--ca DIR] [--out DIR])\n", sub, what, sub, what)
			return 2
		}
		if *out == "" {
			*out = *ca
		}
		var f pki.Files
		var err error
		if sub == "node" {
			hosts := []string(list)
			if len(hosts) == 0 {
				hosts = []string{"127.0.0.1", "localhost"}
			}
			f, err = pki.IssueNode(*ca, *out, name, hosts)
		} else {
			f, err = pki.IssueClient(*ca, *out, name, list)
		}
		if err != nil {
			fmt.Fprintf(stderr, "writ certs %s: %v\n", sub, err)
			return 1
		}
		fmt.Fprintf(stdout, "writ certs: wrote %s and %s (CA %s)\n", f.Cert, f.Key, f.CA)
		return 0
	}
	fmt.Fprintf(stderr, "writ certs: unknown subcommand %q\n%s", sub, certsUsage)
	return 2
}

// listFlag is a repeatable, comma-separated string flag.
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
