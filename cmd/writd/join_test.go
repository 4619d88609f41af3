package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// runWritd runs the real writd binary to completion (it must exit by
// itself within the deadline) and returns its exit code, stdout and stderr.
func runWritd(t *testing.T, bin string, env []string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(filepath.Join(bin, "writd"), args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}, env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode(), out.String(), errb.String()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0, out.String(), errb.String()
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("writd %q kept running (it should have refused); stdout %q stderr %q", args, out.String(), errb.String())
	}
	return 0, "", ""
}

// TestEmptyJoinRefusedRealProcess: every way of giving writd an empty join
// stops the real binary with exit 2 and one line naming join and the fix,
// before anything is written to the data directory; it never comes up as
// a new one-node cluster.
func TestEmptyJoinRefusedRealProcess(t *testing.T) {
	bin := buildBinaries(t)
	addrs := []string{"--api-addr", "127.0.21.10:0", "--raft-addr", "127.0.21.10:7071", "--gossip-addr", "127.0.21.10:7072", "--plugin", pinned(t, filepath.Join(bin, "writ-jobs"))}
	for _, c := range []struct {
		name string
		args []string
		env  []string
		file string
	}{
		{name: "flag empty", args: []string{"--join", ""}},
		{name: "flag comma", args: []string{"--join", ","}},
		{name: "flag equals empty", args: []string{"--join="}},
		{name: "env empty", env: []string{"WRIT_JOIN="}},
		{name: "file empty string", file: "join: [\"\"]\n"},
		{name: "file empty list", file: "join: []\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			data := filepath.Join(t.TempDir(), "data")
			if err := os.Mkdir(data, 0o700); err != nil {
				t.Fatal(err)
			}
			args := append([]string{"--data-dir", data}, addrs...)
			if c.file != "" {
				f := filepath.Join(t.TempDir(), "writd.yaml")
				if err := os.WriteFile(f, []byte(c.file), 0o644); err != nil {
					t.Fatal(err)
				}
				args = append(args, "--config", f)
			}
			code, stdout, stderr := runWritd(t, bin, c.env, append(args, c.args...)...)
			if code != exitConfig {
				t.Fatalf("exit %d, want %d (stdout %q stderr %q)", code, exitConfig, stdout, stderr)
			}
			line := strings.TrimSpace(stderr)
			if strings.Contains(line, "\n") || stdout != "" {
				t.Fatalf("not exactly one line: stdout %q stderr %q", stdout, stderr)
			}
			for _, w := range []string{"writd: config: join (", "lists no address", "--bootstrap"} {
				if !strings.Contains(line, w) {
					t.Errorf("%q lacks %q", line, w)
				}
			}
			if ents, _ := os.ReadDir(data); len(ents) != 0 {
				t.Fatalf("refused start wrote to the data directory: %v", ents)
			}
		})
	}
	t.Run("temporary data dir with seeds", func(t *testing.T) {
		code, stdout, stderr := runWritd(t, bin, nil, append(addrs, "--join", "127.0.21.11:7072")...)
		line := strings.TrimSpace(stderr)
		if code != exitConfig || stdout != "" || strings.Contains(line, "\n") ||
			!strings.Contains(line, "cannot join a cluster as a voter") || !strings.Contains(line, "set data_dir") {
			t.Fatalf("exit %d stdout %q stderr %q: want exit 2 and one line naming data_dir", code, stdout, stderr)
		}
	})
}

// TestSeedJoinFailureOneLine: a node whose seeds are all unreachable stops
// with exit 2 and one "writd:" line naming the seed and the cause once
// (not serf's four-line multi-error behind "membership: membership:").
func TestSeedJoinFailureOneLine(t *testing.T) {
	bin := buildBinaries(t)
	code, stdout, stderr := runWritd(t, bin, nil, "--data-dir", t.TempDir(), "--api-addr", "127.0.21.12:0", "--raft-addr", "127.0.21.12:7071",
		"--gossip-addr", "127.0.21.12:7072", "--plugin", pinned(t, filepath.Join(bin, "writ-jobs")), "--join", "127.0.21.13:7072", "--insecure")
	if code != exitConfig {
		t.Fatalf("exit %d, want %d; stderr %q", code, exitConfig, stderr)
	}
	var lines []string
	for _, l := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(l, "writd: ") {
			lines = append(lines, l)
		}
	}
	if len(lines) != 1 {
		t.Fatalf("%d writd: lines, want 1: %q (stdout %q)", len(lines), lines, stdout)
	}
	l := lines[0]
	if strings.Count(l, "membership:") != 1 || strings.Contains(l, "occurred") || !strings.Contains(l, "127.0.21.13:7072") || !strings.Contains(l, "connection refused") {
		t.Fatalf("seed-join failure line %q: want the component once, the seed and the cause", l)
	}
}

// TestFlagErrorsNameHelp: a flag or argument error of writd and of its
// subcommands is one line that names the command's --help, exit 2.
func TestFlagErrorsNameHelp(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--bogus"}, "unknown flag: --bogus: see `writd --help`"},
		{[]string{"--raft-tick"}, "flag needs an argument: --raft-tick: see `writd --help`"},
		{[]string{"stray"}, `unknown command "stray" for "writd": see ` + "`writd --help`"},
		{[]string{"recover", "--skip-index", "x"}, "see `writd recover --help`"},
		{[]string{"recover", "extra"}, "see `writd recover --help`"},
	} {
		var out, errb bytes.Buffer
		code := run(c.args, nil, &out, &errb)
		msg := strings.TrimSpace(errb.String())
		if code != exitConfig || strings.Contains(msg, "\n") || !strings.HasPrefix(msg, "writd: ") || !strings.Contains(msg, c.want) {
			t.Errorf("%q: exit %d %q, want exit 2 and one line with %q", c.args, code, msg, c.want)
		}
	}
}
