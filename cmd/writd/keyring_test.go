package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/api/writv1"
)

func newGossipKey(t *testing.T) string {
	t.Helper()
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(b)
}

// keyFile writes key to a fresh 0600 file and returns its path.
func keyFile(t *testing.T, key string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "gossip.key")
	if err := os.WriteFile(f, []byte(key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// writctl runs the real writctl binary against p's API.
func (c *cluster) writctl(p *proc, args ...string) (int, string, string) {
	c.t.Helper()
	cmd := exec.Command(filepath.Join(c.bin, "writctl"), append([]string{"--addr", p.api(), "--timeout", "30s"}, args...)...)
	var out, errs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errs
	cmd.Env = cleanEnv()
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		c.t.Fatalf("writctl %v: %v", args, err)
	}
	return code, out.String(), errs.String()
}

type keyringJSON struct {
	NumNodes    int            `json:"num_nodes"`
	NumResp     int            `json:"num_resp"`
	NumErr      int            `json:"num_err"`
	Keys        map[string]int `json:"keys"`
	PrimaryKeys map[string]int `json:"primary_keys"`
}

// TestCluster_KeyRotation rotates the gossip key of a live 3-node cluster of
// real writd processes with the writctl binary (install → use → remove),
// then checks that a node holding only the retired key cannot join while a
// node holding the new key can.
func TestCluster_KeyRotation(t *testing.T) {
	oldKey, newKey := newGossipKey(t), newGossipKey(t)
	fp := api.KeyFingerprint
	kf := func(key string) string { return keyFile(t, key) }
	c := newClusterArgs(t, []string{"--gossip-key-file", kf(oldKey), "--membership-profile", "local"}, "127.0.8.1", "127.0.8.2", "127.0.8.3")
	n1, n2, n3 := c.nodes[0], c.nodes[1], c.nodes[2]

	must := func(p *proc, want int, contains string, args ...string) string {
		t.Helper()
		code, out, errs := c.writctl(p, args...)
		if code != want || !strings.Contains(out+errs, contains) {
			t.Fatalf("writctl %v on %s: exit %d (want %d)\nstdout: %s\nstderr: %s\nwant output containing %q", args, p.name, code, want, out, errs, contains)
		}
		for _, k := range []string{oldKey, newKey} {
			if strings.Contains(out+errs, k) {
				t.Fatalf("writctl %v on %s printed key material:\n%s%s", args, p.name, out, errs)
			}
		}
		return out
	}
	// tryList is keyring list -o json on p; ok when 3 of 3 nodes answered.
	tryList := func(p *proc) (keyringJSON, bool) {
		code, out, _ := c.writctl(p, "-o", "json", "keyring", "list")
		var k keyringJSON
		if code != 0 || json.Unmarshal([]byte(out), &k) != nil {
			return k, false
		}
		return k, k.NumNodes == 3 && k.NumResp == 3 && k.NumErr == 0
	}
	// list waits up to 30 s for all three nodes to answer: on a loaded
	// machine gossip may count a slow node failed for a moment (seen at
	// load ~47: "NumNodes:2" right after "on 3 of 3 nodes").
	list := func(p *proc) keyringJSON {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			k, ok := tryList(p)
			if ok {
				return k
			}
			if time.Now().After(deadline) {
				t.Fatalf("keyring list on %s: want 3 of 3 nodes answering, no errors, within 30s: %+v", p.name, k)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}

	k := list(n1)
	if len(k.Keys) != 1 || k.Keys[fp(oldKey)] != 3 || k.PrimaryKeys[fp(oldKey)] != 3 {
		t.Fatalf("before rotation: want only the start key, on and primary on 3 nodes: %+v", k)
	}
	must(n1, 0, "installed key "+fp(newKey)+" on 3 of 3 nodes", "keyring", "install", "--key-file", kf(newKey))
	// Any node's API serves the rotation: gossip carries it everywhere.
	k = list(n3)
	if len(k.Keys) != 2 || k.Keys[fp(newKey)] != 3 || k.PrimaryKeys[fp(oldKey)] != 3 || k.PrimaryKeys[fp(newKey)] != 0 {
		t.Fatalf("after install: want both keys on 3 nodes, old still primary: %+v", k)
	}
	// The key in use cannot be removed; the refusal says why and what to do.
	must(n2, 1, "primary key", "keyring", "remove", "--key-file", kf(oldKey))
	must(n2, 1, "writctl keyring use", "keyring", "remove", "--key-file", kf(oldKey))
	must(n2, 0, "key "+fp(newKey)+" is now the primary key on 3 of 3 nodes", "keyring", "use", "--key-file", kf(newKey))
	k = list(n1)
	if k.PrimaryKeys[fp(newKey)] != 3 || k.PrimaryKeys[fp(oldKey)] != 0 {
		t.Fatalf("after use: want the new key primary on 3 nodes: %+v", k)
	}
	must(n3, 0, "removed key "+fp(oldKey)+" on 3 of 3 nodes", "keyring", "remove", "--key-file", kf(oldKey))
	k = list(n2)
	if len(k.Keys) != 1 || k.Keys[fp(newKey)] != 3 || k.PrimaryKeys[fp(newKey)] != 3 {
		t.Fatalf("after remove: want only the new key, on and primary on 3 nodes: %+v", k)
	}
	human := must(n1, 0, "FINGERPRINT", "keyring", "list")
	if !strings.Contains(human, fp(newKey)) || strings.Contains(human, fp(oldKey)) || !strings.Contains(human, "3/3") {
		t.Fatalf("keyring list (text): want the new key on 3/3 nodes only:\n%s", human)
	}

	// A restarted node keeps the rotated keyring (persisted in its data
	// directory), although its gossip.key still names the retired key.
	c.stop(n3)
	c.start(n3)
	c.waitReady(n3, 40*time.Second)
	deadline := time.Now().Add(30 * time.Second)
	for {
		k, ok := tryList(n3)
		if ok && k.Keys[fp(newKey)] == 3 && k.PrimaryKeys[fp(newKey)] == 3 && len(k.Keys) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("restarted node: keyring did not settle on the new key: %+v", k)
		}
		time.Sleep(200 * time.Millisecond)
	}

	// A node that is down during a rotation misses it; handed the current
	// key in gossip.key, it rejoins (the key becomes primary in its
	// persisted keyring, the keys it had stay until removed).
	c.stop(n3)
	deadline = time.Now().Add(30 * time.Second)
	for {
		code, out, _ := c.writctl(n1, "-o", "json", "keyring", "list")
		var k keyringJSON
		if code == 0 && json.Unmarshal([]byte(out), &k) == nil && k.NumNodes == 2 && k.NumResp == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("n3 stopped, but gossip still counts it after 30s: %d %s", code, out)
		}
		time.Sleep(200 * time.Millisecond)
	}
	thirdKey := newGossipKey(t)
	must(n1, 0, "on 2 of 2 nodes", "keyring", "install", "--key-file", kf(thirdKey))
	must(n2, 0, "on 2 of 2 nodes", "keyring", "use", "--key-file", kf(thirdKey))
	must(n1, 0, "on 2 of 2 nodes", "keyring", "remove", "--key-file", kf(newKey))
	n3.args = []string{"--gossip-key-file", kf(thirdKey)}
	c.start(n3)
	c.waitReady(n3, 40*time.Second)
	deadline = time.Now().Add(30 * time.Second)
	for {
		k, ok := tryList(n1)
		if ok && k.Keys[fp(thirdKey)] == 3 && k.PrimaryKeys[fp(thirdKey)] == 3 {
			if k.Keys[fp(newKey)] != 1 {
				t.Fatalf("the rejoined node should still hold the key it had: %+v", k)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("rejoined node: keyring did not settle on the third key: %+v", k)
		}
		time.Sleep(200 * time.Millisecond)
	}
	must(n3, 0, "on 3 of 3 nodes", "keyring", "remove", "--key-file", kf(newKey))
	if k := list(n2); len(k.Keys) != 1 || k.Keys[fp(thirdKey)] != 3 {
		t.Fatalf("after removing the stale key everywhere: %+v", k)
	}
	newKey = thirdKey // the key a new node needs now

	// Bad keys are refused before any call, naming the flag and the fix;
	// a key is never taken as an argument.
	must(n1, 2, "not valid base64", "keyring", "install", "--key-file", kf("not*base64"))
	must(n1, 2, "16, 24 or 32 bytes", "keyring", "use", "--key-file", kf(base64.StdEncoding.EncodeToString([]byte("short"))))
	must(n1, 2, "needs --key-file", "keyring", "remove")
	must(n1, 2, "not as an argument", "keyring", "remove", newKey)

	// A node that only knows the retired key cannot join: its start fails
	// and the cluster never lists it.
	stale := &proc{t: t, name: "n4", host: "127.0.8.4", dir: filepath.Join(t.TempDir(), "n4"), join: n1.gossip(), args: []string{"--gossip-key-file", kf(oldKey)}}
	c.nodes = append(c.nodes, stale)
	c.start(stale)
	select {
	case <-stale.exited():
	case <-time.After(60 * time.Second):
		t.Fatal("a node with only the retired gossip key is still running after 60s: it should have failed to join")
	}
	exit := stale.exitCode()
	logs, _ := os.ReadFile(stale.dir + ".log")
	if exit == 0 || !strings.Contains(string(logs), "could not join any seed") || strings.Contains(string(logs), "panic") {
		t.Fatalf("node with the retired key: want a non-zero exit (got %d) with a join error naming the seeds and no panic, got:\n%s", exit, logs)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	m, err := n1.client.Members(ctx, &writv1.MembersRequest{})
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range m.Members {
		if x.Id == "n4" {
			t.Fatalf("node with the retired key is listed as a member: %+v", x)
		}
	}

	// Control: the same kind of node with the new key joins and becomes a voter.
	fresh := &proc{t: t, name: "n5", host: "127.0.8.5", dir: filepath.Join(t.TempDir(), "n5"), join: n2.gossip(), args: []string{"--gossip-key-file", kf(newKey)}}
	c.nodes = append(c.nodes[:3], fresh)
	c.start(fresh)
	c.waitReady(fresh, 40*time.Second)
	c.waitVoters(4, 40*time.Second)
}
