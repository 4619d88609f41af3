package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/writ-dev/writ/pki"
)

func TestPeerTLSKeys(t *testing.T) {
	dir := t.TempDir()
	ca, other := filepath.Join(dir, "ca"), filepath.Join(dir, "other")
	if _, err := pki.NewCA(ca, "c"); err != nil {
		t.Fatal(err)
	}
	if _, err := pki.NewCA(other, "o"); err != nil {
		t.Fatal(err)
	}
	n1, _ := pki.IssueNode(ca, filepath.Join(dir, "n1"), "n1", nil)
	n2, _ := pki.IssueNode(ca, filepath.Join(dir, "n2"), "n2", nil)
	foreign, _ := pki.IssueNode(other, filepath.Join(dir, "f"), "n1", nil)
	loose, _ := pki.IssueNode(ca, filepath.Join(dir, "loose"), "n1", nil)
	if err := os.Chmod(loose.Key, 0o644); err != nil {
		t.Fatal(err)
	}
	env := func(f pki.Files, extra ...string) []string {
		e := []string{"WRIT_NODE_ID=n1", "WRIT_RAFT_TLS_CERT_FILE=" + f.Cert, "WRIT_RAFT_TLS_KEY_FILE=" + f.Key, "WRIT_RAFT_TLS_CA_FILE=" + filepath.Join(ca, pki.CACertFile)}
		return append(e, extra...)
	}
	n, err := Load(Options{Env: env(n1)})
	if err != nil {
		t.Fatal(err)
	}
	if !n.RaftTLS.Enabled() || n.RaftTLS.CertFile != n1.Cert || n.MaxFrameBytes != 64<<20 {
		t.Fatalf("loaded %+v, max frame %d", n.RaftTLS, n.MaxFrameBytes)
	}
	cases := map[string]struct {
		env  []string
		want string
	}{
		"only the certificate":   {[]string{"WRIT_NODE_ID=n1", "WRIT_RAFT_TLS_CERT_FILE=" + n1.Cert}, "raft.tls.key_file (default): not set, but other raft.tls keys are"},
		"another node's":         {env(n2), `raft.tls.cert_file (env WRIT_RAFT_TLS_CERT_FILE): the certificate is node "n2"'s, not node.id "n1"'s: issue one with writ certs node n1`},
		"another CA's":           {env(foreign), "does not verify against raft.tls.ca_file"},
		"group-readable key":     {env(loose), "raft.tls.key_file (env WRIT_RAFT_TLS_KEY_FILE): " + loose.Key + " is readable by group or others (mode -rw-r--r--): chmod 600"},
		"missing file":           {env(pki.Files{Cert: filepath.Join(dir, "nope.crt"), Key: n1.Key}), "no such file"},
		"frame cap out of range": {env(n1, "WRIT_RAFT_MAX_FRAME_BYTES=1024"), "raft.max_frame_bytes (env WRIT_RAFT_MAX_FRAME_BYTES): 1024 is out of range"},
	}
	for name, c := range cases {
		_, err := Load(Options{Env: c.env})
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v, want one line containing %q", name, err, c.want)
		}
	}
}
