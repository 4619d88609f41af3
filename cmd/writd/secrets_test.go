package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/api/writv1"
)

// TestCluster_Secrets runs two real writd processes with gossip
// encryption, n1 reading the key from gossip.key_file and n2 from
// WRIT_GOSSIP_KEY, and checks where the key can be seen: never in any
// process's arguments, never in a plugin's environment, never in a Keyring
// LIST answer or a log; and that both data directories are private (no
// entry readable by group or others, as `find DATA -perm /077` would show),
// even when the directory existed with a wider mode.
func TestCluster_Secrets(t *testing.T) {
	key := newGossipKey(t)
	raw, err := base64.StdEncoding.DecodeString(key)
	if err != nil {
		t.Fatal(err)
	}
	c := &cluster{t: t, bin: buildBinaries(t)}
	root := t.TempDir()
	d1 := filepath.Join(root, "n1")
	if err := os.Mkdir(d1, 0o755); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(d1, "left-by-an-older-version")
	if err := os.WriteFile(stale, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if os.Chmod(d1, 0o755) != nil || os.Chmod(stale, 0o644) != nil {
		t.Fatal("chmod")
	}
	n1 := &proc{t: t, name: "n1", host: "127.0.23.1", dir: d1, args: []string{"--gossip-key-file", keyFile(t, key), "--membership-profile", "local"}}
	n2 := &proc{t: t, name: "n2", host: "127.0.23.2", dir: filepath.Join(root, "n2"), join: n1.gossip(), args: []string{"--membership-profile", "local"},
		env: []string{"WRIT_GOSSIP_KEY=" + key}}
	t.Cleanup(c.stopAll)
	c.nodes = []*proc{n1}
	c.start(n1)
	c.waitReady(n1, 20*time.Second)
	c.nodes = append(c.nodes, n2)
	c.start(n2)
	c.waitReady(n2, 40*time.Second)
	c.waitVoters(2, 40*time.Second)

	// Keyring LIST: fingerprints only, on the wire and in writctl.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var lr *writv1.KeyringResponse
	for {
		lr, err = n2.client.Keyring(ctx, &writv1.KeyringRequest{Op: writv1.KeyringRequest_LIST})
		if err == nil && lr.NumResp == 2 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("keyring list: want 2 of 2 nodes answering: %v %v", lr, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	wire, err := proto.Marshal(lr)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(wire, []byte(key)) || bytes.Contains(wire, raw) {
		t.Fatalf("Keyring LIST answer carries key material: %q", wire)
	}
	if fp := api.KeyFingerprint(key); len(lr.Keys) != 1 || lr.Keys[fp] != 2 || lr.PrimaryKeys[fp] != 2 {
		t.Fatalf("Keyring LIST: want fingerprint %s on and primary on 2 nodes: %v", fp, lr)
	}
	if code, out, errs := c.writctl(n1, "keyring", "list"); code != 0 || strings.Contains(out+errs, key) || !strings.Contains(out, api.KeyFingerprint(key)) {
		t.Fatalf("writctl keyring list: exit %d, want the fingerprint and no key:\n%s%s", code, out, errs)
	}

	// ps: neither node nor any of their plugins shows the key; no plugin
	// inherits it.
	secret := func(what string, b []byte) {
		t.Helper()
		if bytes.Contains(b, []byte(key)) || bytes.Contains(b, raw) {
			t.Errorf("%s holds the gossip key", what)
		}
	}
	for _, p := range c.nodes {
		pid := p.pid()
		secret(fmt.Sprintf("%s (pid %d) arguments", p.name, pid), procFile(t, pid, "cmdline"))
		kids := childPIDs(t, pid)
		if len(kids) == 0 {
			t.Fatalf("%s: no plugin process found among its children", p.name)
		}
		for _, k := range kids {
			secret(fmt.Sprintf("%s's plugin (pid %d) arguments", p.name, k), procFile(t, k, "cmdline"))
			env := procFile(t, k, "environ")
			secret(fmt.Sprintf("%s's plugin (pid %d) environment", p.name, k), env)
			if bytes.Contains(env, []byte("WRIT_GOSSIP")) {
				t.Errorf("%s's plugin (pid %d) environment has a WRIT_GOSSIP_* variable", p.name, k)
			}
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	// Data directories: nothing readable by group or others, the stale
	// file and the pre-existing directory narrowed.
	for _, p := range c.nodes {
		if open := groupOrOthers(t, p.dir); len(open) > 0 {
			t.Errorf("%s: find %s -perm /077 is not empty:\n%s", p.name, p.dir, strings.Join(open, "\n"))
		}
	}
	c.stopAll()
	for _, p := range c.nodes {
		if open := groupOrOthers(t, p.dir); len(open) > 0 {
			t.Errorf("%s after stop: find %s -perm /077 is not empty:\n%s", p.name, p.dir, strings.Join(open, "\n"))
		}
		logs, _ := os.ReadFile(p.dir + ".log")
		secret(p.name+"'s log", logs)
	}
	if l, _ := os.ReadFile(n1.dir + ".log"); !bytes.Contains(l, []byte("data_dir was readable by group or others")) {
		t.Errorf("n1: narrowing a wide data_dir is not logged:\n%s", l)
	}
}

// TestWritd_KeyFileModeRefused: a gossip key file that group or others can
// read stops writd before it binds anything, with one line naming the key
// and the fix.
func TestWritd_KeyFileModeRefused(t *testing.T) {
	bin := buildBinaries(t)
	key := newGossipKey(t)
	f := keyFile(t, key)
	if err := os.Chmod(f, 0o640); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "writd"), "--data-dir", t.TempDir(), "--api-addr", "127.0.23.3:0", "--raft-addr", "127.0.23.3:7071",
		"--gossip-addr", "127.0.23.3:7072", "--gossip-key-file", f, "--plugin", pinned(t, filepath.Join(bin, "writ-jobs")))
	cmd.Env = cleanEnv()
	out, err := cmd.CombinedOutput()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != exitConfig {
		t.Fatalf("writd with a 0640 key file: want exit %d, got %v:\n%s", exitConfig, err, out)
	}
	msg := strings.TrimSpace(string(out))
	if strings.Count(msg, "\n") != 0 || !strings.Contains(msg, "gossip.key_file") || !strings.Contains(msg, "-rw-r-----") || !strings.Contains(msg, "chmod 600") || strings.Contains(msg, key) {
		t.Fatalf("want one line naming gossip.key_file, the mode and chmod 600, without the key; got:\n%s", msg)
	}
}

func procFile(t *testing.T, pid int, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, name))
	if err != nil {
		t.Fatalf("/proc/%d/%s: %v", pid, name, err)
	}
	return b
}

// childPIDs lists the processes whose parent is pid (from /proc/*/stat).
func childPIDs(t *testing.T, pid int) []int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so split after ')'.
		rest := b[bytes.LastIndexByte(b, ')')+1:]
		f := strings.Fields(string(rest))
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			out = append(out, p)
		}
	}
	return out
}

// groupOrOthers lists the entries under dir with any group or other
// permission bit (find dir -perm /077).
func groupOrOthers(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if fi.Mode().Perm()&0o077 != 0 {
			out = append(out, fmt.Sprintf("%v %s", fi.Mode(), path))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
