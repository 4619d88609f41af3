package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// upgradePhases is the order of the phase lines `writctl config upgrade`
// prints for writ's own settings on a healthy 3-node cluster.
var upgradePhases = []*regexp.Regexp{
	regexp.MustCompile(`proposed: document valid; staging \[VALIDATED\]`),
	regexp.MustCompile(`committed at index \d+ \(on [23] of 3 voters\) \[STAGED\]`),
	regexp.MustCompile(`activated at index \d+ tag "\w+"(: active on [0-3]/3 members| \(on [23] of 3 voters\)) \[ACTIVATED\]`),
	regexp.MustCompile(`confirmed by a majority tag "\w+" at index \d+ \(on [23] of 3 voters\): active on 3/3 members \[RELOADED\]`),
}

// checkUpgradePhases runs `writctl config upgrade` on c to version v twice,
// piped (one plain line per phase, in order) and on a pseudo-terminal
// (script(1)): the live line is drawn and rewritten in place, and each
// phase is kept with its duration.
func checkUpgradePhases(t *testing.T, c *cluster, p *proc, v string) {
	t.Helper()
	write := func(v string) string {
		f := filepath.Join(t.TempDir(), "up-"+v+".yaml")
		if err := os.WriteFile(f, []byte("version: \""+v+"\"\nsettings:\n  commit_timeout: 4s\n  max_batch: 64\n  log_level: info\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return f
	}
	ctl := exec.Command(filepath.Join(c.bin, "writctl"), "--addr", p.api(), "config", "upgrade", "--file", write(v), "--wait", "60s")
	ctl.Env = cleanEnv()
	out, err := ctl.CombinedOutput()
	if err != nil {
		t.Fatalf("writctl config upgrade: %v\n%s", err, out)
	}
	if strings.Contains(string(out), "\r") {
		t.Fatalf("piped output has terminal control characters:\n%q", out)
	}
	assertPhases(t, string(out), false)

	if _, err := exec.LookPath("script"); err != nil {
		t.Logf("no script(1): the terminal rendering is not checked here")
		return
	}
	cmdline := strings.Join([]string{filepath.Join(c.bin, "writctl"), "--addr", p.api(), "config", "upgrade", "--file", write(v + "1"), "--wait", "60s"}, " ")
	tty := exec.Command("script", "-q", "-e", "-c", cmdline, "/dev/null")
	tty.Env = cleanEnv()
	tout, err := tty.CombinedOutput()
	if err != nil {
		t.Fatalf("writctl config upgrade on a terminal: %v\n%q", err, tout)
	}
	s := string(tout)
	if !strings.Contains(s, "\r\033[K") || !strings.Contains(s, "waiting for the stage entry to commit") {
		t.Fatalf("no live line on a terminal:\n%q", s)
	}
	assertPhases(t, s, true)
}

// assertPhases checks that every phase line is there, in order; on a
// terminal each one is kept with its duration ("(0.3s)").
func assertPhases(t *testing.T, out string, tty bool) {
	t.Helper()
	rest := out
	for i, re := range upgradePhases {
		if tty && i < len(upgradePhases)-1 {
			// the kept line, after its live drawings
			re = regexp.MustCompile(re.String() + ` \(\d+\.\ds\)\r?\n`)
		}
		loc := re.FindStringIndex(rest)
		if loc == nil {
			t.Fatalf("phase line %q missing or out of order in:\n%q", re, out)
		}
		rest = rest[loc[1]:]
	}
}
