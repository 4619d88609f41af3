package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"pgregory.net/rapid"
)

func write(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func flags(t *testing.T, args ...string) *pflag.FlagSet {
	t.Helper()
	fs := pflag.NewFlagSet("writd", pflag.ContinueOnError)
	AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return fs
}

func TestDefaultsAreDev(t *testing.T) {
	n, err := Load(Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !n.Dev || n.DataDir != "" || !n.Bootstrap || n.APIAddr != "127.0.0.1:7070" || n.CommitTimeout != 5*time.Second {
		t.Fatalf("unexpected defaults: %+v", n)
	}
}

func TestPrecedenceFileEnvFlag(t *testing.T) {
	dir := t.TempDir()
	f := write(t, "writ.yaml", "node:\n  id: from-file\napi:\n  addr: 127.0.3.1:7000\npipeline:\n  commit_timeout: 2s\ndata_dir: "+dir+"\n")
	env := []string{"WRIT_API_ADDR=127.0.3.2:7000", "PATH=/bin", "WRIT_JOIN=127.0.3.5:7072, 127.0.3.6:7072", "WRIT_INSECURE=true"}
	n, err := Load(Options{File: f, Env: env, Flags: flags(t, "--pipeline-commit-timeout", "3s")})
	if err != nil {
		t.Fatal(err)
	}
	if n.NodeID != "from-file" || n.APIAddr != "127.0.3.2:7000" || n.CommitTimeout != 3*time.Second || n.Dev {
		t.Fatalf("precedence wrong: %+v", n)
	}
	if len(n.Join) != 2 || n.Join[1] != "127.0.3.6:7072" || n.Bootstrap {
		t.Fatalf("join/bootstrap wrong: %+v", n)
	}
}

func TestTOML(t *testing.T) {
	f := write(t, "writ.toml", "[node]\nid = \"t1\"\n[raft]\nelection_ticks = 20\n")
	n, err := Load(Options{File: f})
	if err != nil {
		t.Fatal(err)
	}
	if n.NodeID != "t1" || n.ElectionTicks != 20 {
		t.Fatalf("toml not read: %+v", n)
	}
}

func TestBadInput(t *testing.T) {
	unreadable := filepath.Join(t.TempDir(), "locked")
	if err := os.Mkdir(unreadable, 0o000); err != nil {
		t.Fatal(err)
	}
	notDir := write(t, "file", "x")
	cases := []struct {
		name string
		o    func() Options
		want []string // substrings of the single-line error
	}{
		{"unknown file key", func() Options { return Options{File: write(t, "a.yaml", "api:\n  adress: 1.2.3.4:5\n")} }, []string{"api.adress", "unknown key", "remove it"}},
		{"unknown top key toml", func() Options { return Options{File: write(t, "a.toml", "colour = \"red\"\n")} }, []string{"colour", "unknown key"}},
		{"tag not a node key", func() Options { return Options{File: write(t, "a.yaml", "tag: v2\n")} }, []string{"tag", "unknown key"}},
		{"bad port", func() Options { return Options{Env: []string{"WRIT_API_ADDR=127.0.0.1:99999"}} }, []string{"api.addr", "env WRIT_API_ADDR", "port", "65535", "--api-addr"}},
		{"port zero raft", func() Options { return Options{Flags: flags(t, "--raft-addr", "127.0.0.1:0")} }, []string{"raft.addr", "flag --raft-addr", "port 0"}},
		{"hostname not ip", func() Options { return Options{Flags: flags(t, "--gossip-addr", "example.com:80")} }, []string{"gossip.addr", "not an IP"}},
		{"same port twice", func() Options { return Options{Flags: flags(t, "--raft-addr", "127.0.0.1:7070")} }, []string{"raft.addr", "also used by api.addr"}},
		{"bad duration", func() Options { return Options{File: write(t, "d.yaml", "pipeline:\n  commit_timeout: fast\n")} }, []string{"pipeline.commit_timeout", "not a duration", "5s"}},
		{"duration range", func() Options { return Options{Env: []string{"WRIT_PIPELINE_COMMIT_TIMEOUT=1ns"}} }, []string{"pipeline.commit_timeout", "out of range"}},
		{"bad int", func() Options { return Options{Env: []string{"WRIT_RAFT_ELECTION_TICKS=ten"}} }, []string{"raft.election_ticks", "not an integer"}},
		{"heartbeat >= election", func() Options { return Options{Env: []string{"WRIT_RAFT_HEARTBEAT_TICKS=10"}} }, []string{"raft.heartbeat_ticks", "election_ticks"}},
		{"unreadable dir", func() Options { return Options{Env: []string{"WRIT_DATA_DIR=" + unreadable}} }, []string{"data_dir", "not readable", "directory this user can write"}},
		{"data dir is file", func() Options { return Options{Env: []string{"WRIT_DATA_DIR=" + notDir}} }, []string{"data_dir", "not a directory"}},
		{"missing parent", func() Options { return Options{Env: []string{"WRIT_DATA_DIR=/nonexistent/a/b"}} }, []string{"data_dir", "does not exist"}},
		{"unknown env", func() Options { return Options{Env: []string{"WRIT_API_ADRESS=x"}} }, []string{"WRIT_API_ADRESS", "unknown variable"}},
		{"bad node id", func() Options { return Options{Env: []string{"WRIT_NODE_ID=Node One"}} }, []string{"node.id", "not a valid node ID"}},
		{"bad profile", func() Options { return Options{Env: []string{"WRIT_MEMBERSHIP_PROFILE=wan"}} }, []string{"membership.profile", "lan or local"}},
		{"bad level", func() Options { return Options{Env: []string{"WRIT_LOG_LEVEL=loud"}} }, []string{"log.level", "debug, info, warn or error"}},
		{"bad key", func() Options { return Options{Env: []string{"WRIT_GOSSIP_KEY=abc"}} }, []string{"gossip.key", "base64"}},
		{"bad join", func() Options { return Options{Env: []string{"WRIT_JOIN=nohost"}} }, []string{"join", "host:port"}},
		{"missing config file", func() Options { return Options{File: "/nonexistent/writ.yaml"} }, []string{"cannot read", "no such file"}},
		{"bad yaml", func() Options { return Options{File: write(t, "b.yaml", "api: [\n")} }, []string{"cannot parse yaml"}},
		{"plugin not executable", func() Options { return Options{Env: []string{"WRIT_PLUGINS=" + notDir}} }, []string{"plugins", "env WRIT_PLUGINS", "not an executable", "--plugin"}},
		{"bad plugin checksum flag", func() Options { return Options{Flags: flags(t, "--plugin", "/bin/true=abc")} }, []string{"plugins", "flag --plugin", "64 hexadecimal", "PATH=SHA256"}},
		{"bad plugin checksum file", func() Options {
			return Options{File: write(t, "p.yaml", "plugins:\n  - path: /bin/true\n    sha256: abc\n")}
		}, []string{"plugins", "/bin/true", "sha256", "64 hexadecimal", "sha256sum"}},
		{"plugin entry without path", func() Options { return Options{File: write(t, "p.yaml", "plugins:\n  - sha256: abc\n")} }, []string{"plugins", "no path"}},
		{"plugin entry unknown field", func() Options {
			return Options{File: write(t, "p.yaml", "plugins:\n  - path: /bin/true\n    args: [x]\n")}
		}, []string{"plugins", `unknown field "args"`}},
		{"plugin twice", func() Options { return Options{Flags: flags(t, "--plugin", "/bin/true", "--plugin", "/bin/true")} }, []string{"plugins", "listed twice"}},
		{"removed plugins.jobs key", func() Options { return Options{File: write(t, "p.yaml", "plugins:\n  jobs: /bin/true\n")} }, []string{"plugins.jobs", "no longer a key", "plugins: [{path"}},
		{"removed jobs env", func() Options { return Options{Env: []string{"WRIT_PLUGINS_JOBS=/bin/true"}} }, []string{"WRIT_PLUGINS_JOBS", "unknown variable"}},
		{"schema dir missing", func() Options { return Options{Flags: flags(t, "--schema", "/nonexistent/schema")} }, []string{"schema.dir", "flag --schema", "no such file", "directory holding the schema's .cue files"}},
		{"schema dir is a file", func() Options { return Options{Env: []string{"WRIT_SCHEMA_DIR=" + notDir}} }, []string{"schema.dir", "env WRIT_SCHEMA_DIR", "not a directory"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.name == "unreadable dir" && os.Geteuid() == 0 {
				t.Skip("root can read a mode-000 directory")
			}
			_, err := Load(c.o())
			if err == nil {
				t.Fatal("accepted bad input")
			}
			msg := err.Error()
			if strings.Contains(msg, "\n") {
				t.Errorf("error is not one line: %q", msg)
			}
			for _, w := range c.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not mention %q", msg, w)
				}
			}
		})
	}
}

func TestClusterDocument(t *testing.T) {
	c, err := ParseCluster([]byte("version: \"2\"\nsettings:\n  commit_timeout: 2s\n  max_batch: 64\n  log_level: debug\n  heartbeat: 200ms\n"), "")
	if err != nil {
		t.Fatal(err)
	}
	if c.Version != "2" || c.Settings["commit_timeout"] != "2s" || c.Settings["max_batch"] != "64" {
		t.Fatalf("bad cluster doc: %+v", c)
	}
	if got := string(c.Payload()); got != `{"settings":{"commit_timeout":"2s","heartbeat":"200ms","log_level":"debug","max_batch":64},"version":"2"}` {
		t.Fatalf("payload %s", got)
	}
	back, err := ParseCluster(c.Payload(), "")
	if err != nil || len(Diff(c, back)) != 0 {
		t.Fatalf("payload does not round-trip: %v %v", err, Diff(c, back))
	}
	base, err := Load(Options{})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, ch := range Diff(ClusterOf(base), c) {
		keys = append(keys, ch.Key)
	}
	if strings.Join(keys, ",") != "version,settings.commit_timeout,settings.heartbeat,settings.max_batch,settings.log_level" {
		t.Fatalf("diff keys = %v", keys)
	}
	n2, restart := Apply(base, c)
	if n2.CommitTimeout != 5*time.Second || n2.LogLevel != "debug" || strings.Join(restart, ",") != "settings.commit_timeout,settings.heartbeat,settings.max_batch" {
		t.Fatalf("apply: %+v restart %v", n2, restart)
	}
	n3 := ApplyAll(base, c)
	if n3.CommitTimeout != 2*time.Second || n3.MaxBatch != 64 || n3.LogLevel != "debug" || n3.HeartbeatTicks != 2 {
		t.Fatalf("apply all: %+v", n3)
	}
	if base.CommitTimeout != 5*time.Second {
		t.Fatal("Apply modified its input")
	}
	ok := "version: \"3\"\nsettings:\n  commit_timeout: 1s\n  max_batch: 8\n  log_level: info\n"
	if _, err := ParseCluster([]byte(ok), "yaml"); err != nil {
		t.Fatal(err)
	}
	toml := "version = \"3\"\n[settings]\ncommit_timeout = \"1s\"\nmax_batch = 8\nlog_level = \"warn\"\n"
	if c, err := ParseCluster([]byte(toml), ""); err != nil || c.Settings["log_level"] != "warn" {
		t.Fatalf("toml: %v %v", c, err)
	}
	for doc, want := range map[string]string{
		"api:\n  addr: 1.2.3.4:5\n" + ok:                                      "node-local",
		"bogus: 1\n" + ok:                                                     "unknown key",
		strings.Replace(ok, "max_batch: 8", "max_batch: 0", 1):                "settings.max_batch",
		strings.Replace(ok, "commit_timeout: 1s", "commit_timeout: 1m30s", 1): "settings.commit_timeout",
		strings.Replace(ok, "log_level: info", "log_level: loud", 1):          "settings.log_level",
		strings.Replace(ok, "version: \"3\"", "version: v3", 1):               "not a version",
		strings.Replace(ok, "  max_batch: 8\n", "", 1):                        "settings.max_batch",
	} {
		if _, err := ParseCluster([]byte(doc), "yaml"); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseCluster(%q) = %v, want error containing %q", doc, err, want)
		}
	}
}

// TestOperatorDocListsEveryKey keeps docs/operator.md in step with Keys and
// Settings.
func TestOperatorDocListsEveryKey(t *testing.T) {
	b, err := os.ReadFile("../../docs/operator.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for _, k := range Keys {
		for _, w := range []string{"`" + k.Name + "`", "`--" + k.Flag() + "`", "`" + k.Env()} {
			if !strings.Contains(doc, w) {
				t.Errorf("docs/operator.md does not mention %s", w)
			}
		}
	}
	for _, s := range Settings {
		if !strings.Contains(doc, "  "+s.Name+":") {
			t.Errorf("docs/operator.md's upgrade example does not show settings.%s", s.Name)
		}
	}
}

// FuzzParseCluster: any document either parses into settings that validate
// again after a round trip through Payload, or fails with a config error.
func FuzzParseCluster(f *testing.F) {
	for _, s := range []string{
		"version: \"2\"\nsettings:\n  commit_timeout: 4s\n  max_batch: 128\n  log_level: info\n",
		`{"version":"1.2.3","settings":{"commit_timeout":"1m","max_batch":1,"log_level":"debug","heartbeat":"200ms"}}`,
		"version = \"3\"\n[settings]\ncommit_timeout = \"1s\"\nmax_batch = 8\nlog_level = \"warn\"\n",
		"api:\n  addr: x\n",
		"{",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		c, err := ParseCluster(doc, "")
		if err != nil {
			if _, ok := err.(*Error); !ok {
				t.Fatalf("error of type %T: %v", err, err)
			}
			return
		}
		back, err := ParseCluster(c.Payload(), "json")
		if err != nil {
			t.Fatalf("payload of a valid document does not parse: %v\n%s", err, c.Payload())
		}
		if d := Diff(c, back); len(d) != 0 {
			t.Fatalf("round trip changed %v", d)
		}
	})
}

// TestPluginsEveryForm reads the plugin list from a YAML file, a TOML file,
// the environment and repeated flags, with and without checksums, and checks
// that flags replace the file's list. An entry without a checksum needs
// insecure: true outside dev mode (TestPluginPinningOutsideDev).
func TestPluginsEveryForm(t *testing.T) {
	sum := strings.Repeat("ab", 32)
	yml := write(t, "p.yaml", "insecure: true\nplugins:\n  - path: /bin/true\n    sha256: "+strings.ToUpper(sum)+"\n  - {path: /bin/sh}\n")
	n, err := Load(Options{File: yml})
	if err != nil {
		t.Fatal(err)
	}
	want := []Plugin{{Path: "/bin/true", SHA256: sum}, {Path: "/bin/sh"}}
	if len(n.Plugins) != 2 || n.Plugins[0] != want[0] || n.Plugins[1] != want[1] {
		t.Fatalf("yaml plugins: %+v", n.Plugins)
	}
	toml := write(t, "p.toml", "[[plugins]]\npath = \"/bin/true\"\nsha256 = \""+sum+"\"\n")
	if n, err = Load(Options{File: toml}); err != nil || len(n.Plugins) != 1 || n.Plugins[0] != want[0] {
		t.Fatalf("toml plugins: %+v %v", n, err)
	}
	if n, err = Load(Options{Env: []string{"WRIT_INSECURE=true", "WRIT_PLUGINS=/bin/true=" + sum + ",/bin/sh"}}); err != nil || len(n.Plugins) != 2 || n.Plugins[0] != want[0] || n.Plugins[1] != want[1] {
		t.Fatalf("env plugins: %+v %v", n, err)
	}
	n, err = Load(Options{File: yml, Flags: flags(t, "--plugin", "/bin/sh", "--plugin", "/bin/true="+sum)})
	if err != nil || len(n.Plugins) != 2 || n.Plugins[0] != want[1] || n.Plugins[1] != want[0] {
		t.Fatalf("flag plugins do not replace the file's: %+v %v", n, err)
	}
	if n, err = Load(Options{}); err != nil || len(n.Plugins) != 0 || !n.Dev {
		t.Fatalf("default: %+v %v", n, err)
	}
}

func TestParsePluginRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		path := rapid.StringMatching(`/[a-z0-9_./-]{1,40}`).Draw(t, "path")
		sum := rapid.SampledFrom([]string{"", strings.Repeat("0", 64), strings.Repeat("f", 64)}).Draw(t, "sum")
		p := Plugin{Path: path, SHA256: sum}
		got, err := ParsePlugin(p.String())
		if err != nil || got != p {
			t.Fatalf("ParsePlugin(%q) = %+v, %v", p.String(), got, err)
		}
	})
}

// TestPinPlugin: PinPlugin pins the binary's current SHA-256, in the form
// ParsePlugin reads back; a missing file is an error naming it.
func TestPinPlugin(t *testing.T) {
	f := write(t, "plugin", "#!/bin/sh\n")
	p, err := PinPlugin(f)
	// sha256 of "#!/bin/sh\n"
	if err != nil || p.Path != f || p.SHA256 != "a8076d3d28d21e02012b20eaf7dbf75409a6277134439025f282e368e3305abf" {
		t.Fatalf("PinPlugin: %+v %v", p, err)
	}
	back, err := ParsePlugin(p.String())
	if err != nil || back != p {
		t.Fatalf("round trip: %+v %v", back, err)
	}
	if _, err := PinPlugin(f + ".missing"); err == nil || !strings.Contains(err.Error(), f+".missing") {
		t.Fatalf("missing binary: %v", err)
	}
}
