package membership

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/writ-dev/writ/internal/proctest"
)

// A live 3-node cluster rotates its gossip key from A to B: install B,
// use B, remove A. Afterwards only B joins, and the keyring file persists B.
func TestAgent_FakeVoters_LiveKeyRotation(t *testing.T) {
	const (
		keyA = "3wVf3rSAVxd8QZ2Mj0+sDuO3L7/LO+mq0A1d+KfTgj0="
		keyB = "Oc5cMKPixUXkV5rK9a3vQ3FJUqsZ6tV1Qk1mD6m3Y2o="
	)
	f := newFakeRaft("n1", "127.0.2.22:9000")
	defer f.close()
	dir := t.TempDir()
	var agents []*Agent
	for i, ip := range []string{"127.0.2.22", "127.0.2.23", "127.0.2.24"} {
		id := []string{"n1", "n2", "n3"}[i]
		var seeds []string
		if i > 0 {
			seeds = []string{agents[0].Addr()}
		}
		cfg := testConfig(id, ip, seeds...)
		cfg.EncryptKey = keyA
		cfg.KeyringFile = filepath.Join(dir, id+".keyring")
		agents = append(agents, startAgent(t, cfg, f.node(id)))
	}
	proctest.WaitFor(t, 15*time.Second, "3 voters", func() bool { v, _ := f.snapshot(); return join(v) == "n1,n2,n3" })
	n1 := agents[0]

	rep, err := n1.ListKeys()
	if err != nil || rep.Keys[keyA] != 3 || rep.PrimaryKeys[keyA] != 3 || rep.NumResp != 3 {
		t.Fatalf("list before: %+v %v", rep, err)
	}
	if _, err := n1.InstallKey(keyB); err != nil {
		t.Fatalf("install: %v", err)
	}
	if rep, err := n1.ListKeys(); err != nil || rep.Keys[keyA] != 3 || rep.Keys[keyB] != 3 {
		t.Fatalf("list after install: %+v %v", rep, err)
	}
	if _, err := n1.UseKey(keyB); err != nil {
		t.Fatalf("use: %v", err)
	}
	// The primary key cannot be removed.
	if _, err := n1.RemoveKey(keyB); err == nil {
		t.Fatal("removing the primary key succeeded")
	}
	if _, err := n1.RemoveKey(keyA); err != nil {
		t.Fatalf("remove: %v", err)
	}
	rep, err = n1.ListKeys()
	if err != nil || len(rep.Keys) != 1 || rep.Keys[keyB] != 3 || rep.PrimaryKeys[keyB] != 3 {
		t.Fatalf("list after rotation: %+v %v", rep, err)
	}
	// Persisted for restarts.
	for _, id := range []string{"n1", "n2", "n3"} {
		data, err := os.ReadFile(filepath.Join(dir, id+".keyring"))
		var keys []string
		if err != nil || json.Unmarshal(data, &keys) != nil || len(keys) != 1 || keys[0] != keyB {
			t.Fatalf("%s keyring file %s (%v), want only key B", id, data, err)
		}
	}
	// The cluster still gossips: a node with the old key cannot join, one
	// with the new key can and is admitted.
	old := testConfig("n4", "127.0.2.25", n1.Addr())
	old.EncryptKey = keyA
	if a, err := Start(old, nil); err == nil {
		_ = a.Shutdown()
		t.Fatal("a node with the retired key joined")
	} else if !strings.Contains(err.Error(), "gossip key") {
		t.Fatalf("error %v should mention the gossip key", err)
	}
	nw := testConfig("n5", "127.0.2.25", agents[2].Addr())
	nw.EncryptKey = keyB
	startAgent(t, nw, f.node("n5"))
	proctest.WaitFor(t, 45*time.Second, "n5 voter", func() bool { v, _ := f.snapshot(); return join(v) == "n1,n2,n3,n5" })
	if _, _, violations, _ := f.report(); len(violations) > 0 {
		t.Fatalf("raft model violations: %v", violations)
	}
}

func TestDecodeKey(t *testing.T) {
	if _, err := DecodeKey("3wVf3rSAVxd8QZ2Mj0+sDuO3L7/LO+mq0A1d+KfTgj0="); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"", "%%%", "c2hvcnQ="} {
		if _, err := DecodeKey(bad); err == nil || !strings.HasPrefix(err.Error(), "membership: gossip key") {
			t.Errorf("DecodeKey(%q) = %v", bad, err)
		}
	}
}
