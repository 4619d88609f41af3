package main

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/api/writv1"
)

// TestKeyringAgainstRealNode rotates the gossip key of a real writd started
// with gossip encryption, in process through Run.
func TestKeyringAgainstRealNode(t *testing.T) {
	gen := func() string {
		b := make([]byte, 32)
		_, _ = rand.Read(b)
		return base64.StdEncoding.EncodeToString(b)
	}
	oldKey, newKey := gen(), gen()
	oldFP, newFP := api.KeyFingerprint(oldKey), api.KeyFingerprint(newKey)
	dir := t.TempDir()
	oldFile, newFile := filepath.Join(dir, "old.key"), filepath.Join(dir, "new.key")
	if os.WriteFile(oldFile, []byte(oldKey+"\n"), 0o600) != nil || os.WriteFile(newFile, []byte(newKey), 0o600) != nil {
		t.Fatal("cannot write key files")
	}
	addr := startNode(t, "127.0.23.10", "--gossip-key-file", oldFile)
	stdin := ""
	must := func(want int, contains string, args ...string) string {
		t.Helper()
		code, out, errs := run(t, stdin, append([]string{"--addr", addr, "--timeout", "30s"}, args...)...)
		if code != want || !strings.Contains(out+errs, contains) {
			t.Fatalf("writctl %v: exit %d (want %d)\nstdout: %s\nstderr: %s\nwant output containing %q", args, code, want, out, errs, contains)
		}
		for _, k := range []string{oldKey, newKey} {
			if strings.Contains(out+errs, k) {
				t.Fatalf("writctl %v printed key material:\n%s%s", args, out, errs)
			}
		}
		return out
	}
	type listed struct {
		Keys        map[string]int `json:"keys"`
		PrimaryKeys map[string]int `json:"primary_keys"`
	}
	list := func() listed {
		t.Helper()
		var l listed
		out := must(0, "", "-o", "json", "keyring", "list")
		if err := json.Unmarshal([]byte(out), &l); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		return l
	}
	if l := list(); len(l.Keys) != 1 || l.Keys[oldFP] != 1 || l.PrimaryKeys[oldFP] != 1 {
		t.Fatalf("start: want fingerprint %s: %+v", oldFP, l)
	}
	must(0, "installed key "+newFP+" on 1 of 1 nodes", "keyring", "install", "--key-file", newFile)
	must(1, "key "+oldFP+" is the primary key", "keyring", "remove", "--key-file", oldFile)
	stdin = newKey + "\n"
	must(0, `"fingerprint":"`+newFP+`"`, "-o", "json", "keyring", "use", "--key-file", "-")
	stdin = ""
	must(0, "removed key "+oldFP, "keyring", "remove", "--key-file", oldFile)
	if l := list(); len(l.Keys) != 1 || l.Keys[newFP] != 1 || l.PrimaryKeys[newFP] != 1 {
		t.Fatalf("after rotation: %+v", l)
	}
	out := must(0, "1/1", "keyring", "list")
	if !strings.Contains(out, "FINGERPRINT") || !strings.Contains(out, newFP) || strings.Contains(out, oldFP) {
		t.Fatalf("keyring list:\n%s", out)
	}
}

// TestRenderMembersRefused checks the text rendering of refused nodes (a
// node with a different schema fingerprint is not cheap to produce with
// real processes; the API mapping is tested in api and writd's node
// package).
func TestRenderMembersRefused(t *testing.T) {
	m := &writv1.MembersResponse{
		Members: []*writv1.Member{
			{Id: "n1", Status: "alive", Role: "voter", Leader: true, ApiAddr: "a1", RaftAddr: "r1", GossipAddr: "g1", Match: 7},
			{Id: "n4", Status: "alive", GossipAddr: "g4", Refused: "incompatible schema: fingerprint differs"},
		},
		Refused: []*writv1.Refusal{{Id: "n4", GossipAddr: "g4", RaftAddr: "r4", Reason: "incompatible schema: fingerprint differs", SinceUnixMs: 1700000000000}},
	}
	var b bytes.Buffer
	if err := renderMembers(&b, m); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	lines := strings.Split(out, "\n")
	if !strings.Contains(lines[0], "REFUSED") {
		t.Fatalf("header lacks REFUSED:\n%s", out)
	}
	if !strings.HasPrefix(lines[2], "n4") || !strings.Contains(lines[2], " - ") || !strings.HasSuffix(lines[2], "incompatible schema: fingerprint differs") {
		t.Fatalf("refused member row:\n%s", out)
	}
	for _, want := range []string{"refused (1)", "r4", "2023-11-14T22:13:20Z"} {
		if !strings.Contains(out, want) {
			t.Fatalf("output lacks %q:\n%s", want, out)
		}
	}
	b.Reset()
	m.Refused, m.Members = nil, m.Members[:1]
	if err := renderMembers(&b, m); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "refused") {
		t.Fatalf("no refusals but a refused section:\n%s", b.String())
	}
}
