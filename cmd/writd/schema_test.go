package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/writ-dev/writ/internal/proctest"
	"github.com/writ-dev/writ/schema/gen"
	"github.com/writ-dev/writ/schema/load"
)

// leaseSchema is the test schema (not the embedded jobs one) with a cyclic
// machine; writ-lease is its handler plugin.
const leaseSchema = "testdata/lease/schema"

// writctl's exit code for a REJECTED request.
const (
	exitUsage    = 2
	exitRejected = 3
)

// writctl runs the real writctl binary and returns its combined output and
// exit code.
func writctl(t *testing.T, bin string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(filepath.Join(bin, "writctl"), args...)
	cmd.Env = cleanEnv()
	out, _ := cmd.CombinedOutput()
	return string(out), cmd.ProcessState.ExitCode()
}

// TestCluster_UserSchema runs three real writd processes on a schema loaded
// with --schema (a runtime catalog, no generated code in writd) and its
// plugin given with --plugin, and drives it through writctl: requests,
// a fact, a rejected payload, a type of the embedded schema (unknown here),
// and the cyclic machine HELD → FREE → HELD.
func TestCluster_UserSchema(t *testing.T) {
	bin := buildBinaries(t)
	schema, err := filepath.Abs(leaseSchema)
	if err != nil {
		t.Fatal(err)
	}
	c := newClusterArgs(t, []string{"--schema", schema, "--plugin", pinned(t, filepath.Join(bin, "writ-lease")), "--membership-profile", "local"},
		"127.0.16.1", "127.0.16.2", "127.0.16.3")
	ctl := func(p *proc, want int, args ...string) string {
		t.Helper()
		out, code := writctl(t, bin, append([]string{"--addr", p.api()}, args...)...)
		if code != want {
			t.Fatalf("writctl %v: exit %d, want %d:\n%s", args, code, want, out)
		}
		return out
	}
	n1, n2, n3 := c.nodes[0], c.nodes[1], c.nodes[2]
	out := ctl(n2, 0, "submit", "lease.acquire", `{"lease_id":"db","holder":"alice","ttl_ms":5000}`)
	if !strings.Contains(out, "COMMITTED") || !strings.Contains(out, `"holder":"alice"`) {
		t.Fatalf("acquire: %s", out)
	}
	// a bound of the user schema is enforced by the runtime catalog
	out = ctl(n3, exitRejected, "submit", "lease.acquire", `{"lease_id":"db","holder":"bob","ttl_ms":50}`)
	if !strings.Contains(out, "ttl_ms") || !strings.Contains(out, ">= 100") {
		t.Fatalf("out-of-range ttl_ms: %s", out)
	}
	// a string at the schema's maximum (512 runes, 3 bytes each) passes,
	// one rune more is refused naming the field
	note := strings.Repeat("€", 512)
	ctl(n1, 0, "submit", "lease.acquire", `{"lease_id":"big","holder":"alice","ttl_ms":3600000,"note":"`+note+`"}`)
	out = ctl(n1, exitRejected, "submit", "lease.acquire", `{"lease_id":"big2","holder":"alice","ttl_ms":3600000,"note":"`+note+`€"}`)
	if !strings.Contains(out, `field "note"`) {
		t.Fatalf("note over 512 runes: %s", out)
	}
	// the embedded schema's types do not exist on this cluster
	out = ctl(n1, exitRejected, "submit", "job.submit", `{"job_id":"j","queue":"q","priority":1,"command":"x"}`)
	if !strings.Contains(out, "unknown entry type") {
		t.Fatalf("job.submit on the lease schema: %s", out)
	}
	// the handler's rule: the holder must match
	out = ctl(n1, exitRejected, "submit", "lease.release", `{"lease_id":"db","holder":"bob"}`)
	if !strings.Contains(out, `not held by "bob"`) {
		t.Fatalf("release by another holder: %s", out)
	}
	ctl(n3, 0, "submit", "lease.release", `{"lease_id":"db","holder":"alice"}`)
	out = ctl(n2, 0, "submit", "lease.acquire", `{"lease_id":"db","holder":"bob","ttl_ms":1000}`)
	if !strings.Contains(out, `"holder":"bob"`) {
		t.Fatalf("re-acquire after release (FREE → HELD): %s", out)
	}
	ctl(n1, 0, "report", "lease.expired", `{"report_id":"exp-1","lease_id":"db","seq":1}`)
	deadline := time.Now().Add(20 * time.Second)
	for {
		out, code := writctl(t, bin, "--addr", n3.api(), "get", "lease/db")
		if code != 0 && strings.Contains(out, "not found") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the expired fact did not free lease/db: exit %d %s", code, out)
		}
		time.Sleep(200 * time.Millisecond)
	}
	out = ctl(n3, 0, "submit", "lease.acquire", `{"lease_id":"db","holder":"carol","ttl_ms":1000}`)
	if !strings.Contains(out, `"holder":"carol"`) {
		t.Fatalf("acquire after expiry: %s", out)
	}
	c.converge(30 * time.Second)
}

// TestSchemaBadInput: a schema directory that is missing, does not load or
// vets BLOCKED, a plugin built for another schema, and two plugins serving
// one type each stop writd with one line per problem naming it and the
// fix, exit non-zero, and leave the data directory untouched.
func TestSchemaBadInput(t *testing.T) {
	bin := buildBinaries(t)
	schema, err := filepath.Abs(leaseSchema)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	broken := filepath.Join(dir, "broken")
	blocked := filepath.Join(dir, "blocked")
	for d, src := range map[string]string{
		broken:  "package x\nentries: {\n",
		blocked: "package x\nentries: \"a.b\": {type_number: 1, class: \"request\", machine: \"nope\", keys: [\"a/{id}\"], payload: {id: string}}\n",
	} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "s.cue"), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	data := filepath.Join(dir, "data")
	if err := os.Mkdir(data, 0o700); err != nil {
		t.Fatal(err)
	}
	lease, jobs := filepath.Join(bin, "writ-lease"), filepath.Join(bin, "writ-jobs")
	leaseCopy := filepath.Join(dir, "writ-lease-copy")
	if b, err := os.ReadFile(lease); err != nil || os.WriteFile(leaseCopy, b, 0o755) != nil {
		t.Fatalf("copy writ-lease: %v", err)
	}
	pLease, pJobs, pCopy := pinned(t, lease), pinned(t, jobs), pinned(t, leaseCopy)
	base := []string{"--data-dir", data, "--api-addr", "127.0.16.20:0", "--raft-addr", "127.0.16.20:7071", "--gossip-addr", "127.0.16.20:7072"}
	for _, c := range []struct {
		name  string
		args  []string
		lines int // exact number of output lines (0: any, at least one)
		want  []string
	}{
		{"missing dir", []string{"--schema", filepath.Join(dir, "nope")}, 1, []string{"schema.dir", "no such file", "directory holding the schema's .cue files"}},
		{"empty dir", []string{"--schema", data}, 1, []string{"schema.dir", "no .cue files"}},
		{"does not load", []string{"--schema", broken, "--plugin", pLease}, 0, []string{"s.cue", "BLOCKED", "nothing was started", "writ vet"}},
		{"vets blocked", []string{"--schema", blocked, "--plugin", pLease}, 0, []string{"s.cue", "nope", "nothing was started"}},
		{"no plugin for the schema", []string{"--schema", schema}, 1, []string{"plugins", "none configured", "lease.acquire", "lease.expired", "--plugin"}},
		{"plugin of another schema", []string{"--schema", schema, "--plugin", pJobs}, 1, []string{"writ-jobs", "fingerprint", "rebuild the plugin"}},
		{"jobs schema with the lease plugin", []string{"--plugin", pLease}, 1, []string{"writ-lease", "fingerprint"}},
		{"plugin checksum mismatch", []string{"--plugin", lease + "=" + strings.Repeat("0", 64), "--schema", schema}, 1, []string{"writ-lease", "checksum mismatch"}},
		{"two plugins for one type", []string{"--schema", schema, "--plugin", pLease, "--plugin", pCopy}, 1, []string{"served by both", "writ-lease", "writ-lease-copy", "exactly one plugin"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var so, se bytes.Buffer
			cmd := exec.Command(filepath.Join(bin, "writd"), append(append([]string{}, base...), c.args...)...)
			cmd.Env, cmd.Stdout, cmd.Stderr = cleanEnv(), &so, &se
			done := make(chan error, 1)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			go func() { done <- cmd.Wait() }()
			select {
			case <-done:
			case <-time.After(60 * time.Second):
				_ = cmd.Process.Kill()
				t.Fatalf("writd kept running: %s", se.String())
			}
			if cmd.ProcessState.ExitCode() == 0 {
				t.Fatalf("writd exited 0 on bad input: %s", se.String())
			}
			// The answer is the "writd: " lines; anything else on stderr
			// may only be a structured log line (a refused plugin process
			// is logged as it is stopped).
			var lines []string
			for _, l := range strings.Split(strings.TrimSpace(se.String()), "\n") {
				switch {
				case strings.HasPrefix(l, "writd: "):
					lines = append(lines, l)
				case !strings.HasPrefix(l, "time="):
					t.Errorf("stray output line: %q", l)
				}
			}
			msg := strings.Join(lines, "\n")
			if len(lines) == 0 || c.lines > 0 && len(lines) != c.lines {
				t.Errorf("want %d writd line(s), got %d:\n%s", c.lines, len(lines), se.String())
			}
			for _, w := range c.want {
				if !strings.Contains(msg, w) {
					t.Errorf("%q does not mention %q", msg, w)
				}
			}
			if so.Len() != 0 {
				t.Errorf("writd printed its start banner: %s", so.String())
			}
		})
	}
	if ents, _ := os.ReadDir(data); len(ents) != 0 {
		t.Fatalf("bad input touched the data directory: %v", ents)
	}
}

// TestLeaseGenUpToDate: the test plugin's generated package matches the
// test schema (regenerate with `go run ./cmd/writ gen --schema
// cmd/writd/testdata/lease/schema --out cmd/writd/testdata/lease/leasegen`).
func TestLeaseGenUpToDate(t *testing.T) {
	res, err := load.FS(os.DirFS(leaseSchema), ".", "cmd/writd/testdata/lease/schema")
	if err != nil || res.Failed() {
		t.Fatalf("load: %v %v", err, res.Err())
	}
	files, err := gen.Generate(res.Schema, gen.Options{Package: "leasegen", Source: "cmd/writd/testdata/lease/schema"})
	if err != nil {
		t.Fatal(err)
	}
	diff, err := gen.Check("testdata/lease/leasegen", files)
	if err != nil || diff != "" {
		t.Fatalf("testdata/lease/leasegen is stale (%v):\n%s", err, diff)
	}
}

// TestNoPluginsFindsJobsPlugin: with the embedded jobs schema and no
// plugins configured, writd runs writ-jobs from next to its own binary.
// That is how the zero-config dev node finds its plugin; a configured node
// (here, addresses in the test's range) does it only with insecure: true,
// and warns that the binary is trusted as found (TestUnpinnedPlugin*).
func TestNoPluginsFindsJobsPlugin(t *testing.T) {
	bin := buildBinaries(t)
	cmd := exec.Command(filepath.Join(bin, "writd"), "--api-addr", "127.0.16.33:7070", "--raft-addr", "127.0.16.33:7071", "--gossip-addr", "127.0.16.33:7072", "--insecure")
	cmd.Env = cleanEnv()
	var so, se proctest.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, code := writctl(t, bin, "--addr", "127.0.16.33:7070", "plugins")
		if code == 0 && strings.Contains(out, "writ-jobs") && strings.Contains(out, filepath.Join(bin, "writ-jobs")) && strings.Contains(out, "healthy") {
			if !strings.Contains(se.String(), "not pinned by sha256") {
				t.Errorf("no warning that the found plugin is trusted unpinned: %s", se.String())
			}
			break
		}
		select {
		case <-done:
			t.Fatalf("writd exited: %s", se.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no healthy writ-jobs from next to writd: %s\n%s", out, se.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
}
