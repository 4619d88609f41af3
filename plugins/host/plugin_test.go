package host_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	plugin "github.com/hashicorp/go-plugin"

	"github.com/writ-dev/writ/examples/jobs/handler"

	"github.com/writ-dev/writ/plugins/host"
	"github.com/writ-dev/writ/plugins/sdk"
	"github.com/writ-dev/writ/schema/ir"
)

// The test binary doubles as a handler plugin: started with
// -writ-test-plugin=<mode> it serves the test handlers below over the real
// go-plugin protocol instead of running tests.

const pluginFlag = "-writ-test-plugin="

// cpuProfileFlag passes WRITTEST_PLUGIN_CPUPROFILE to the test plugin.
const cpuProfileFlag = "-writ-test-cpuprofile="

func cpuProfileArg() string {
	for _, a := range os.Args[1:] {
		if f, ok := strings.CutPrefix(a, cpuProfileFlag); ok {
			return f
		}
	}
	return ""
}

const testFingerprint = "fp-host-test-1"

func TestMain(m *testing.M) {
	for _, a := range os.Args[1:] {
		if mode, ok := strings.CutPrefix(a, pluginFlag); ok {
			servePlugin(mode)
			return
		}
		if dir, ok := strings.CutPrefix(a, nodeFlag); ok {
			runNode(dir)
			return
		}
	}
	code := m.Run()
	removeJobsPlugin()
	os.Exit(code)
}

// testCatalog is a small static schema for host tests.
type testCatalog struct {
	fp       string
	types    []*ir.TypeDesc
	machines []*ir.Machine
}

func newTestCatalog() *testCatalog {
	tm := &ir.Machine{Name: "tm", Key: "k", States: []string{"A", "B"}, Initial: []string{"A"}, Transitions: map[string][]string{"A": {"B"}}}
	mk := func(n uint32, name string, c ir.Class) *ir.TypeDesc {
		return &ir.TypeDesc{Name: name, Number: n, Class: c, Entry: &ir.Entry{Name: name, Number: n, Class: c}}
	}
	batch := mk(5, "test.batch", ir.ClassReceipt)
	batch.Entry.Item = "test.put"
	return &testCatalog{
		fp: testFingerprint,
		types: []*ir.TypeDesc{
			mk(1, "test.put", ir.ClassRequest),
			mk(2, "test.slow", ir.ClassRequest),
			mk(3, "test.panic", ir.ClassRequest),
			mk(4, "test.fact", ir.ClassFact),
			batch,
			mk(6, "test.cfg", ir.ClassConfig),
		},
		machines: []*ir.Machine{tm},
	}
}

func (c *testCatalog) Fingerprint() string { return c.fp }
func (c *testCatalog) Schema() *ir.Schema {
	s := &ir.Schema{Package: "hosttest", Machines: c.machines}
	for _, t := range c.types {
		s.Entries = append(s.Entries, t.Entry)
	}
	return s
}
func (c *testCatalog) Type(name string) (*ir.TypeDesc, bool) {
	for _, t := range c.types {
		if t.Name == name {
			return t, true
		}
	}
	return nil, false
}
func (c *testCatalog) TypeByNumber(n uint32) (*ir.TypeDesc, bool) {
	for _, t := range c.types {
		if t.Number == n {
			return t, true
		}
	}
	return nil, false
}
func (c *testCatalog) Types() []*ir.TypeDesc { return c.types }
func (c *testCatalog) Machine(name string) (*ir.Machine, bool) {
	for _, m := range c.machines {
		if m.Name == name {
			return m, true
		}
	}
	return nil, false
}

var _ ir.Catalog = (*testCatalog)(nil)

type putPayload struct {
	Key    string `json:"key"`
	Value  string `json:"value"`
	Marker string `json:"marker,omitempty"`
	To     string `json:"to,omitempty"`
}

func testHandlers() map[string]sdk.Handler {
	return map[string]sdk.Handler{
		"test.put": sdk.HandlerFunc(func(ctx context.Context, c *sdk.Call) error {
			var p putPayload
			if err := c.DecodePayload(&p); err != nil {
				return err
			}
			if p.Key == "" {
				return sdk.Invalid("key", "required")
			}
			if p.Value == "refuse" {
				return sdk.Rule("value %q is refused", p.Value)
			}
			c.Put(p.Key, []byte(p.Value))
			return c.SetResult(map[string]string{"put": p.Key})
		}),
		"test.slow": sdk.HandlerFunc(func(ctx context.Context, c *sdk.Call) error {
			var p putPayload
			if err := c.DecodePayload(&p); err != nil {
				return err
			}
			if p.Marker != "" {
				if err := os.WriteFile(p.Marker, []byte("started"), 0o644); err != nil {
					return err
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(30 * time.Second):
			}
			return sdk.Internal("slow handler finished")
		}),
		"test.panic": sdk.HandlerFunc(func(ctx context.Context, c *sdk.Call) error {
			var p *putPayload
			_ = p.Key // nil dereference
			return nil
		}),
		"test.fact": sdk.HandlerFunc(func(ctx context.Context, c *sdk.Call) error {
			var p putPayload
			if err := c.DecodePayload(&p); err != nil {
				return err
			}
			c.Transition("tm", p.Key, p.To)
			return nil
		}),
	}
}

func servePlugin(mode string) {
	p := &sdk.Plugin{Name: "host-test", Version: "1.2.3", Fingerprint: testFingerprint, Handlers: testHandlers()}
	versions := map[int]plugin.PluginSet{int(sdk.Handshake.ProtocolVersion): sdk.PluginSet(p)}
	switch mode {
	case "jobs":
		// The jobs handler served by the test binary, so that
		// WRITTEST_PLUGIN_CPUPROFILE can profile it (BenchmarkJobsEvaluate
		// runs the real writ-jobs binary).
		p = handler.Plugin()
		versions = map[int]plugin.PluginSet{int(sdk.Handshake.ProtocolVersion): sdk.PluginSet(p)}
	case "ok":
	case "nop":
		// BenchmarkEvaluate_NopHandler: test.put does nothing (an empty
		// effect), so a batch costs only the process boundary, the SDK
		// and the batch codec.
		p.Handlers["test.put"] = sdk.HandlerFunc(func(context.Context, *sdk.Call) error { return nil })
	case "noise":
		fmt.Println("hello from a chatty plugin")
	case "badfp":
		p.Fingerprint = "fp-something-else"
	case "unknowntype":
		p.Handlers["test.nope"] = p.Handlers["test.put"]
	case "receipt":
		p.Handlers["test.batch"] = p.Handlers["test.put"]
	case "partial":
		p.Handlers = map[string]sdk.Handler{"test.put": p.Handlers["test.put"]}
	case "rest":
		delete(p.Handlers, "test.put")
		p.Name = "host-test-rest"
	case "proto1":
		// A plugin built against the retired version-1 protocol.
		versions = map[int]plugin.PluginSet{1: sdk.PluginSet(p)}
	case "exit":
		fmt.Fprintln(os.Stderr, "refusing to start: no configuration")
		os.Exit(3)
	default:
		fmt.Fprintf(os.Stderr, "unknown test plugin mode %q\n", mode)
		os.Exit(2)
	}
	// cpuProfileFlag<file> profiles the plugin side of a benchmark (the
	// host passes a plugin no WRITTEST_* variable, so it comes as an
	// argument).
	if f := cpuProfileArg(); f != "" {
		out, err := os.Create(f)
		if err == nil && pprof.StartCPUProfile(out) == nil {
			defer pprof.StopCPUProfile()
		}
	}
	sdk.TuneRuntime() // as sdk.Serve does
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig:  sdk.Handshake,
		VersionedPlugins: versions,
		GRPCServer:       sdk.NewGRPCServer,
	})
}

var (
	selfOnce       sync.Once
	selfPath, self string
	selfErr        error
)

// selfPlugin returns the path and checksum of the test binary.
func selfPlugin(t testing.TB) (string, string) {
	t.Helper()
	selfOnce.Do(func() {
		selfPath, selfErr = os.Executable()
		if selfErr != nil {
			return
		}
		var b []byte
		if b, selfErr = os.ReadFile(selfPath); selfErr == nil {
			s := sha256.Sum256(b)
			self = hex.EncodeToString(s[:])
		}
	})
	if selfErr != nil {
		t.Fatal(selfErr)
	}
	return selfPath, self
}

// nodeFlag makes the test binary act as a node that loads the "ok" plugin,
// writes the plugin's PID to <dir>/plugin.pid and waits to be killed.
const nodeFlag = "-writ-test-node="

func runNode(dir string) {
	path, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	_, sum := selfPlugin(nodeTB{})
	h, err := host.New(host.Config{
		Catalog:   newTestCatalog(),
		Plugins:   []host.PluginConfig{{Path: path, SHA256: sum, Args: []string{pluginFlag + "ok"}}},
		LogOutput: os.Stderr,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	pid := h.Status()[0].PID
	if err := os.WriteFile(filepath.Join(dir, "plugin.pid"), []byte(strconv.Itoa(pid)), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	select {}
}

// nodeTB lets selfPlugin run outside a test.
type nodeTB struct{ testing.TB }

func (nodeTB) Helper() {}
func (nodeTB) Fatal(args ...any) {
	fmt.Fprintln(os.Stderr, args...)
	os.Exit(1)
}
