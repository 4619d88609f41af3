package main

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"

	"github.com/writ-dev/writ/node/config"
)

// repoRoot is the module root, two levels above this package.
const repoRoot = "../.."

// loadWritdArgs parses args with writd's own flag set and loads them with the
// real configuration loader. The data directory flag, if present, is pointed
// at a fresh directory (its value is returned) so the check does not depend
// on this machine's /var/lib.
func loadWritdArgs(t *testing.T, args []string) (*config.Node, string, error) {
	t.Helper()
	fs := pflag.NewFlagSet("writd", pflag.ContinueOnError)
	config.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		return nil, "", fmt.Errorf("writd flags %q: %w", args, err)
	}
	if fs.NArg() > 0 {
		return nil, "", fmt.Errorf("writd takes no arguments, got %q", fs.Args())
	}
	data := ""
	if f := fs.Lookup("data-dir"); f != nil && f.Changed {
		data = f.Value.String()
		if err := fs.Set("data-dir", t.TempDir()); err != nil {
			return nil, "", err
		}
	}
	n, err := config.Load(config.Options{Flags: fs})
	return n, data, err
}

type composeFile struct {
	Services map[string]struct {
		Image      string   `yaml:"image"`
		Build      any      `yaml:"build"`
		Command    []string `yaml:"command"`
		StopSignal string   `yaml:"stop_signal"`
		StopGrace  string   `yaml:"stop_grace_period"`
		Restart    string   `yaml:"restart"`
		DependsOn  []string `yaml:"depends_on"`
		Volumes    []string `yaml:"volumes"`
		Ports      []string `yaml:"ports"`
		Networks   map[string]struct {
			IPv4 string `yaml:"ipv4_address"`
		} `yaml:"networks"`
	} `yaml:"services"`
	Networks map[string]struct {
		IPAM struct {
			Config []struct {
				Subnet string `yaml:"subnet"`
			} `yaml:"config"`
		} `yaml:"ipam"`
	} `yaml:"networks"`
	Volumes map[string]any `yaml:"volumes"`
	// Common is the anchor the services merge.
	Common any `yaml:"x-writd"`
}

func readCompose(t *testing.T, path string) composeFile {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var c composeFile
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return c
}

// TestComposeClusterIsValid: deploy/compose.yaml describes a 3-node cluster
// writd accepts. Each service's command is parsed with writd's flags and
// loaded by the real config loader; every listener sits on the service's
// fixed address in the declared subnet; exactly one node bootstraps and the
// others join it through gossip addresses of other services; data lives on
// a declared named volume at the data directory; stopping sends SIGINT so a
// restart keeps membership; published ports are the container's API and
// metrics ports.
func TestComposeClusterIsValid(t *testing.T) {
	checkCompose(t, filepath.Join(repoRoot, "deploy", "compose.yaml"))
}

func checkCompose(t *testing.T, path string) {
	c := readCompose(t, path)
	if len(c.Services) != 3 {
		t.Fatalf("%d services, want a 3-node cluster", len(c.Services))
	}
	gossip := map[string]string{} // gossip addr -> service
	nodes := map[string]*config.Node{}
	ids := map[string]bool{}
	for name, s := range c.Services {
		n, data, err := loadWritdArgs(t, s.Command)
		if err != nil {
			t.Errorf("service %s: %v", name, err)
			continue
		}
		nodes[name] = n
		if ids[n.NodeID] {
			t.Errorf("service %s: node.id %s used twice", name, n.NodeID)
		}
		ids[n.NodeID] = true
		if s.StopSignal != "SIGINT" {
			t.Errorf("service %s: stop_signal %q: want SIGINT (SIGTERM makes the node leave the cluster)", name, s.StopSignal)
		}
		for _, d := range s.DependsOn {
			if _, ok := c.Services[d]; !ok {
				t.Errorf("service %s: depends_on %s: no such service", name, d)
			}
		}
		if s.Image == "" || s.Build == nil {
			t.Errorf("service %s: needs image and build", name)
		}
		if len(s.Networks) != 1 {
			t.Errorf("service %s: %d networks, want 1", name, len(s.Networks))
		}
		for net, a := range s.Networks {
			nw, ok := c.Networks[net]
			if !ok || len(nw.IPAM.Config) != 1 {
				t.Errorf("service %s: network %s not declared with one ipam subnet", name, net)
				continue
			}
			checkInSubnet(t, name, a.IPv4, nw.IPAM.Config[0].Subnet)
			for _, l := range []string{n.APIAddr, n.RaftAddr, n.GossipAddr, n.MetricsAddr} {
				if h, _, _ := strings.Cut(l, ":"); h != a.IPv4 {
					t.Errorf("service %s: listener %s is not on its address %s", name, l, a.IPv4)
				}
			}
		}
		gossip[n.GossipAddr] = name
		if data == "" {
			t.Errorf("service %s: no --data-dir (a temporary directory would lose the node's state)", name)
		}
		vol := false
		for _, v := range s.Volumes {
			src, dst, _ := strings.Cut(v, ":")
			if dst == data {
				if _, ok := c.Volumes[src]; !ok {
					t.Errorf("service %s: volume %s is not a declared named volume", name, src)
				}
				vol = true
			}
		}
		if !vol {
			t.Errorf("service %s: data dir %s is not on a volume", name, data)
		}
		for _, p := range s.Ports {
			parts := strings.Split(p, ":")
			inner := ":" + parts[len(parts)-1]
			if !strings.HasSuffix(n.APIAddr, inner) && !strings.HasSuffix(n.MetricsAddr, inner) {
				t.Errorf("service %s: published port %s is neither the API nor the metrics port", name, p)
			}
		}
	}
	boot := 0
	for name, n := range nodes {
		if len(n.Join) == 0 {
			boot++
			continue
		}
		for _, j := range n.Join {
			other, ok := gossip[j]
			if !ok || other == name {
				t.Errorf("service %s: join %s is not another service's gossip address", name, j)
			}
		}
	}
	if len(nodes) == 3 && boot != 1 {
		t.Errorf("%d services bootstrap a cluster, want exactly 1", boot)
	}
}

func checkInSubnet(t *testing.T, svc, ip, subnet string) {
	t.Helper()
	_, n, err := net.ParseCIDR(subnet)
	if err != nil {
		t.Errorf("subnet %q: %v", subnet, err)
		return
	}
	if !n.Contains(net.ParseIP(ip)) {
		t.Errorf("service %s: ipv4_address %q is not in %s", svc, ip, subnet)
	}
}

// dockerInstr is one Dockerfile instruction with its continuation lines joined.
type dockerInstr struct {
	op, args string
}

func readDockerfile(t *testing.T, path string) []dockerInstr {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []dockerInstr
	var cur string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.HasSuffix(line, "\\") {
			cur += strings.TrimSuffix(line, "\\") + " "
			continue
		}
		cur += line
		op, args, _ := strings.Cut(cur, " ")
		out = append(out, dockerInstr{strings.ToUpper(op), strings.TrimSpace(args)})
		cur = ""
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestDockerfileMatchesTree: the Dockerfile builds what the tree has. Its
// golang image is the go.mod Go version; every COPY from the build context
// names an existing path; every make target it runs exists in the
// Makefile; the runtime stage copies exactly the binaries `make build`
// produces; the exposed ports are writd's default API, raft and gossip
// ports plus the documented metrics port; the default command is a
// configuration writd accepts, with its data directory on the declared
// volume; it does not run as root; and .dockerignore keeps what the build
// copies.
func TestDockerfileMatchesTree(t *testing.T) {
	checkDockerfile(t, filepath.Join(repoRoot, "Dockerfile"))
}

func checkDockerfile(t *testing.T, path string) {
	ins := readDockerfile(t, path)
	gomod, err := os.ReadFile(filepath.Join(repoRoot, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	goVer := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(gomod)
	makefile, err := os.ReadFile(filepath.Join(repoRoot, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	ignore, err := os.ReadFile(filepath.Join(repoRoot, ".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	var ignored []string
	for _, l := range strings.Split(string(ignore), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			ignored = append(ignored, l)
		}
	}
	for _, need := range []string{"go.mod", "go.sum", "Makefile", "cmd", "examples"} {
		for _, p := range ignored {
			if ok, _ := filepath.Match(p, need); ok {
				t.Errorf(".dockerignore %s excludes %s, which the build needs", p, need)
			}
		}
	}
	var stages, exposed, binaries []string
	var volume, user string
	var cmd []string
	for _, in := range ins {
		switch in.op {
		case "FROM":
			stages = append(stages, in.args)
			if strings.HasPrefix(in.args, "golang:") && !strings.HasPrefix(in.args, "golang:"+string(goVer[1])) {
				t.Errorf("FROM %s: go.mod says go %s", in.args, goVer[1])
			}
		case "COPY":
			fields := strings.Fields(in.args)
			from := ""
			var paths []string
			for _, f := range fields {
				if v, ok := strings.CutPrefix(f, "--from="); ok {
					from = v
				} else if !strings.HasPrefix(f, "--") {
					paths = append(paths, f)
				}
			}
			srcs := paths[:len(paths)-1]
			if from != "" {
				for _, s := range srcs {
					if d, ok := strings.CutPrefix(s, "/out/"); ok && d != "data" {
						binaries = append(binaries, d)
					}
				}
				continue
			}
			for _, s := range srcs {
				if _, err := os.Stat(filepath.Join(repoRoot, s)); err != nil {
					t.Errorf("COPY %s: %v", s, err)
				}
				for _, p := range ignored {
					if ok, _ := filepath.Match(p, s); ok {
						t.Errorf("COPY %s: excluded from the build context by .dockerignore %s", s, p)
					}
				}
			}
		case "RUN":
			for _, m := range regexp.MustCompile(`\bmake ([a-z][a-z0-9-]*)`).FindAllStringSubmatch(in.args, -1) {
				if !regexp.MustCompile(`(?m)^` + m[1] + `:`).Match(makefile) {
					t.Errorf("RUN make %s: no such Makefile target", m[1])
				}
			}
		case "EXPOSE":
			exposed = strings.Fields(in.args)
		case "VOLUME":
			volume = strings.Trim(in.args, `[]" `)
		case "USER":
			user = in.args
		case "CMD":
			if err := yaml.Unmarshal([]byte(in.args), &cmd); err != nil {
				t.Errorf("CMD %s: not an exec-form list: %v", in.args, err)
			}
		}
	}
	if len(stages) < 2 {
		t.Errorf("%d stages, want a builder and a runtime stage", len(stages))
	}
	want := []string{"writ", "writ-jobs", "writctl", "writd"}
	for _, d := range []string{"cmd/writd", "cmd/writctl", "cmd/writ", "examples/jobs/cmd/writ-jobs"} {
		if !regexp.MustCompile(`(?m)^build:\n(\t.*\n)*\t.*` + regexp.QuoteMeta("./"+filepath.Dir(d))).Match(makefile) {
			t.Errorf("make build does not build %s", d)
		}
	}
	slices.Sort(binaries)
	if !slices.Equal(binaries, want) {
		t.Errorf("runtime image gets binaries %v, want %v", binaries, want)
	}
	if user == "" || strings.HasPrefix(user, "0") || strings.HasPrefix(user, "root") {
		t.Errorf("USER %q: the image must not run as root", user)
	}
	def := map[string]string{}
	for _, k := range config.Keys {
		if s, ok := k.Default.(string); ok {
			def[k.Name] = s
		}
	}
	wantPorts := []string{"7070/tcp", "7071/tcp", "7072/tcp", "7072/udp", "7079/tcp"}
	for _, k := range []string{"api.addr", "raft.addr", "gossip.addr"} {
		_, p, _ := net.SplitHostPort(def[k])
		if !slices.Contains(exposed, p+"/tcp") {
			t.Errorf("EXPOSE %v lacks %s's default port %s", exposed, k, p)
		}
	}
	if !slices.Equal(exposed, wantPorts) {
		t.Errorf("EXPOSE %v, want %v", exposed, wantPorts)
	}
	n, data, err := loadWritdArgs(t, cmd)
	if err != nil {
		t.Fatalf("CMD: %v", err)
	}
	if data != volume {
		t.Errorf("CMD data dir %q is not the VOLUME %q", data, volume)
	}
	for _, a := range []string{n.APIAddr, n.MetricsAddr} {
		if _, p, _ := net.SplitHostPort(a); !slices.Contains(exposed, p+"/tcp") {
			t.Errorf("CMD listens on %s, a port the image does not EXPOSE", a)
		}
	}
}
