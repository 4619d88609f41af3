package main

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/writ-dev/writ/node/config"
)

var exampleConfig = filepath.Join(repoRoot, "deploy", "writd.yaml")

// TestExampleConfigLoads: deploy/writd.yaml is accepted by the real
// configuration loader (unknown keys, bad addresses, durations and enums
// are errors there) and configures a cluster node, not dev mode. Its data
// directory is swapped for a fresh one through WRIT_DATA_DIR, which takes
// precedence over the file. Its TLS and gossip key paths are commented
// out (they do not exist here), so it loads only with WRIT_INSECURE=true
// and is refused, naming the keys, without it.
func TestExampleConfigLoads(t *testing.T) {
	dir := t.TempDir()
	_, err := config.Load(config.Options{File: exampleConfig, Env: []string{"WRIT_DATA_DIR=" + dir}})
	if err == nil || !strings.Contains(err.Error(), "api.tls.cert_file") || !strings.Contains(err.Error(), "gossip.key_file") {
		t.Fatalf("example without TLS or gossip key loaded without insecure: %v", err)
	}
	n, err := config.Load(config.Options{File: exampleConfig, Env: []string{"WRIT_DATA_DIR=" + dir, "WRIT_INSECURE=true"}})
	if err != nil {
		t.Fatal(err)
	}
	if n.Dev || n.File != exampleConfig || n.DataDir != dir {
		t.Errorf("loaded %+v: want a configured node from %s with data dir %s", n, exampleConfig, dir)
	}
	if n.MetricsAddr == "" || n.LogFormat != "json" {
		t.Errorf("metrics.addr %q, log.format %q: the example should serve metrics and log JSON to the journal", n.MetricsAddr, n.LogFormat)
	}
	if exampleDataDir(t) == "" {
		t.Error("the example sets no data_dir: a temporary directory would lose the node's state")
	}
}

func exampleDataDir(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(exampleConfig)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		DataDir string `yaml:"data_dir"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	return doc.DataDir
}

// unit is a systemd unit file: section -> key -> values in order.
type unit map[string]map[string][]string

func (u unit) get(sec, key string) string {
	v := u[sec][key]
	if len(v) == 0 {
		return ""
	}
	return v[len(v)-1]
}

func readUnit(t *testing.T, path string) unit {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	u := unit{}
	sec := ""
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || line[0] == '#' || line[0] == ';':
		case line[0] == '[':
			sec = strings.Trim(line, "[]")
			u[sec] = map[string][]string{}
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || sec == "" {
				t.Fatalf("%s: bad line %q", path, line)
			}
			u[sec][k] = append(u[sec][k], v)
		}
	}
	return u
}

// TestSystemdUnit: deploy/writd.service runs writd the way writd behaves.
// Type is exec because writd sends no sd_notify readiness; ExecStart parses
// with writd's flags and loads the example config; the exit status the
// unit refuses to restart is the one writd returns for a configuration
// error, and the fatal-runtime status (1) is restarted; stop sends SIGINT
// (stay a member) rather than SIGTERM (leave); the data directory of the
// example config is the unit's only writable path and its StateDirectory;
// the hardening settings are present; it does not run as root. When
// systemd-analyze is installed, the unit also passes `systemd-analyze
// verify`.
func TestSystemdUnit(t *testing.T) {
	path := filepath.Join(repoRoot, "deploy", "writd.service")
	u := readUnit(t, path)
	sd := sdNotifySources(t)
	if typ := u.get("Service", "Type"); (typ == "notify") != (len(sd) > 0) || (typ != "exec" && typ != "notify") {
		t.Errorf("Type=%s, but writd sources mentioning NOTIFY_SOCKET: %v", typ, sd)
	}
	exe := strings.Fields(u.get("Service", "ExecStart"))
	if len(exe) == 0 || filepath.Base(exe[0]) != "writd" {
		t.Fatalf("ExecStart=%v: want writd", exe)
	}
	args := slices.Clone(exe[1:])
	for i, a := range args {
		if (a == "--config" || a == "-c") && i+1 < len(args) {
			if filepath.Base(args[i+1]) != filepath.Base(exampleConfig) {
				t.Errorf("ExecStart --config %s: the install steps put deploy/writd.yaml there under another name", args[i+1])
			}
			args[i+1] = exampleConfig
		}
	}
	// the example's TLS and key paths are commented out: it loads only
	// as insecure (TestExampleConfigLoads checks the refusal without)
	args = append(args, "--data-dir", t.TempDir(), "--insecure")
	if _, _, err := loadWritdArgs(t, args); err != nil {
		t.Errorf("ExecStart: %v", err)
	}

	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("raft:\n  tick: soon\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	cfgExit := run([]string{"--config", bad}, nil, &out, &errb)
	if cfgExit == 0 || !strings.Contains(errb.String(), "raft.tick") {
		t.Fatalf("writd with a bad config: exit %d, %q", cfgExit, errb.String())
	}
	prevent := strings.Fields(u.get("Service", "RestartPreventExitStatus"))
	if !slices.Contains(prevent, strconv.Itoa(cfgExit)) {
		t.Errorf("RestartPreventExitStatus=%v lacks %d, writd's configuration-error exit code", prevent, cfgExit)
	}
	// A fatal apply stop stops again at the same entry on every restart:
	// restarting would only loop (docs/operator.md, "Fatal apply stop").
	if !slices.Contains(prevent, strconv.Itoa(exitApply)) {
		t.Errorf("RestartPreventExitStatus=%v lacks %d, writd's fatal-apply-stop exit code", prevent, exitApply)
	}
	if slices.Contains(prevent, "1") {
		t.Error("RestartPreventExitStatus includes 1, writd's fatal runtime exit: that one should restart")
	}
	for k, want := range map[string]string{
		"Restart": "on-failure", "KillSignal": "SIGINT", "NoNewPrivileges": "yes", "ProtectSystem": "strict",
		"PrivateTmp": "yes", "ProtectHome": "yes", "PrivateDevices": "yes", "CapabilityBoundingSet": "",
	} {
		if _, ok := u["Service"][k]; !ok || u.get("Service", k) != want {
			t.Errorf("%s=%q, want %q", k, u.get("Service", k), want)
		}
	}
	if usr := u.get("Service", "User"); usr == "" || usr == "root" || usr == "0" {
		t.Errorf("User=%q: run writd as its own user", usr)
	}
	data := exampleDataDir(t)
	if rw := strings.Fields(u.get("Service", "ReadWritePaths")); !slices.Equal(rw, []string{data}) {
		t.Errorf("ReadWritePaths=%v, want the example's data_dir %s only", rw, data)
	}
	if sdir := "/var/lib/" + u.get("Service", "StateDirectory"); sdir != data {
		t.Errorf("StateDirectory makes %s, the example's data_dir is %s", sdir, data)
	}
	if u.get("Install", "WantedBy") == "" {
		t.Error("no [Install] WantedBy: systemctl enable would do nothing")
	}

	verify, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Log("systemd-analyze not installed: verify skipped")
		return
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// verify insists that ExecStart's binary exists; stand this test binary in.
	tmp := filepath.Join(t.TempDir(), "writd.service")
	if err := os.WriteFile(tmp, bytes.ReplaceAll(b, []byte(exe[0]), []byte(self)), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(verify, "verify", tmp).CombinedOutput(); err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// sdNotifySources lists non-test Go files of writd and its packages that
// mention NOTIFY_SOCKET (sd_notify support).
func sdNotifySources(t *testing.T) []string {
	t.Helper()
	var hits []string
	err := filepath.WalkDir(".", func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return err
		}
		b, err := os.ReadFile(p)
		if err == nil && bytes.Contains(b, []byte("NOTIFY_SOCKET")) {
			hits = append(hits, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return hits
}
