package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/writ-dev/writ/pki"
)

// scriptBlock returns the lines of script from the first line starting with
// from up to and including the first later line starting with to.
func scriptBlock(t *testing.T, script, from, to string) string {
	t.Helper()
	lines := strings.Split(script, "\n")
	start := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, from) })
	if start < 0 {
		t.Fatalf("scripts/demo.sh: no line starting with %q", from)
	}
	end := slices.IndexFunc(lines[start+1:], func(l string) bool { return strings.HasPrefix(l, to) })
	if end < 0 {
		t.Fatalf("scripts/demo.sh: no line starting with %q after %q", to, from)
	}
	return strings.Join(lines[start:start+1+end+1], "\n") + "\n"
}

// TestDemoScriptStartsSecuredNodes runs, with bash, the credentials step and
// the start_node function of scripts/demo.sh (make demo) against a stand-in
// writd that records its arguments, then loads a joining node's arguments
// with writd's real flag set and configuration loader: the demo must start
// its nodes with peer TLS, API TLS with authentication and a gossip key, and
// without insecure. The certificates come from package pki (what `writ
// certs` runs); the tokens and gossip key files are the script's own.
func TestDemoScriptStartsSecuredNodes(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("bash not found")
	}
	b, err := os.ReadFile(filepath.Join(repoRoot, "scripts", "demo.sh"))
	if err != nil {
		t.Fatal(err)
	}
	script := string(b)
	creds := scriptBlock(t, script, `say "Make the cluster's credentials`, "unset WRITCTL_TOKEN")
	startNode := scriptBlock(t, script, "start_node() {", "}")

	root := t.TempDir()
	bin, data := filepath.Join(root, "bin"), filepath.Join(root, "demo-data")
	certs := filepath.Join(data, "certs")
	if err := os.MkdirAll(bin, 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := pki.NewCA(certs, "demo"); err != nil {
		t.Fatal(err)
	}
	if _, err := pki.IssueNode(certs, certs, "n2", []string{"127.0.0.2"}); err != nil {
		t.Fatal(err)
	}
	argsFile := filepath.Join(root, "writd.args")
	stubs := map[string]string{
		"writ":      "#!/bin/sh\nexit 0\n", // the certificates are already made above
		"writd":     "#!/bin/sh\nprintf '%s\\n' \"$@\" >" + argsFile + "\n",
		"writ-jobs": "#!/bin/sh\nexit 1\n", // loaded, never started
	}
	for name, body := range stubs {
		if err := os.WriteFile(filepath.Join(bin, name), []byte(body), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	prog := "set -euo pipefail\n" +
		"BIN=" + bin + " DATA=" + data + " CERTS=" + certs + "\n" +
		"HOSTS=(127.0.0.1 127.0.0.2 127.0.0.3) NODES=(n1 n2 n3) API_PORT=7170 RAFT_PORT=7171 GOSSIP_PORT=7172\n" +
		"declare -A PID\nsay() { :; }\nnote() { :; }\n" +
		creds + startNode +
		"start_node n2 1 127.0.0.1:7172\nwait\n"
	cmd := exec.Command(bash, "-c", prog)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("running the demo's credentials step and start_node: %v\n%s", err, out)
	}
	raw, err := os.ReadFile(argsFile)
	if err != nil {
		t.Fatalf("start_node did not run writd: %v", err)
	}
	args := strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n")
	if slices.Contains(args, "--insecure") {
		t.Fatalf("make demo starts a node with --insecure: %q", args)
	}
	n, _, err := loadWritdArgs(t, args)
	if err != nil {
		t.Fatalf("the demo's joining node would not start: %v\nargs %q", err, args)
	}
	if n.Insecure || len(n.InsecureMissing) > 0 {
		t.Fatalf("the demo's joining node runs insecure, missing %v", n.InsecureMissing)
	}
	for _, want := range []string{"--raft-tls-cert-file", "--api-tls-cert-file", "--api-tls-client-ca-file", "--api-tokens-file", "--gossip-key-file"} {
		if !slices.Contains(args, want) {
			t.Errorf("make demo starts a node without %s: %q", want, args)
		}
	}
}
