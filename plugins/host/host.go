package host

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	hclog "github.com/hashicorp/go-hclog"
	plugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/writ-dev/writ/internal/backoff"
	"github.com/writ-dev/writ/pipeline"
	pb "github.com/writ-dev/writ/plugins/proto"
	"github.com/writ-dev/writ/schema/ir"
)

// PluginConfig names one plugin binary and its expected checksum.
type PluginConfig struct {
	// Path is the plugin binary.
	Path string
	// SHA256 is the expected hex SHA-256 of the binary.
	SHA256 string
	// Args are extra command-line arguments for the plugin process.
	Args []string
}

// Config configures a Host.
type Config struct {
	// Plugins to load. All are loaded or none.
	Plugins []PluginConfig
	// Catalog is the node's schema: plugins must match its fingerprint and
	// serve only its types, and every type needing evaluation must be served.
	Catalog ir.Catalog
	// CallTimeout bounds the wait for one batch's answer; a plugin that
	// does not answer in time is treated as down and restarted. Default 10s.
	CallTimeout time.Duration
	// StartTimeout bounds a plugin's start and handshake. Default 10s.
	StartTimeout time.Duration
	// RestartMin and RestartMax bound the restart backoff. Defaults 100ms,
	// 10s. Each delay is shortened by up to backoff.DefaultJitter of itself,
	// so plugins that crashed together do not restart together.
	RestartMin, RestartMax time.Duration
	// LogOutput receives plugin stderr and host log lines. Default os.Stderr.
	LogOutput io.Writer
}

// dialOptions are the host's gRPC options for every plugin connection: the
// protocol's fixed flow window (see pluginproto.FlowWindow), and no retries
// (a batch is never sent twice; a broken plugin is restarted instead), which
// also spares gRPC buffering every request for a retry.
var dialOptions = []grpc.DialOption{
	grpc.WithDisableRetry(),
	grpc.WithInitialWindowSize(pb.FlowWindow),
	grpc.WithInitialConnWindowSize(pb.FlowWindow),
}

// ProtocolVersions lists the wire protocol versions this host speaks.
var ProtocolVersions = []int{pb.ProtocolVersion}

// NeedsHandler reports whether entries of the type are evaluated by a
// plugin: requests and facts are; receipts (their items are evaluated as
// their own types) and configuration changes (handled by the pipeline) are
// not.
func NeedsHandler(t *ir.TypeDesc) bool {
	return t.Class == ir.ClassRequest || t.Class == ir.ClassFact
}

// Status describes one loaded plugin, for operators (writctl plugins).
type Status struct {
	Name      string
	Version   string
	Path      string
	Types     []string
	Healthy   bool
	Restarts  int
	LastError string
	PID       int
}

// ErrClosed is returned by Evaluate after Close.
var ErrClosed = errors.New("host: closed")

// Host runs handler plugins and implements pipeline.Evaluator.
type Host struct {
	cfg     Config
	logger  hclog.Logger
	plugins []*instance
	route   map[string]*instance

	stop      chan struct{}
	wg        sync.WaitGroup
	closeOnce sync.Once
	mu        sync.RWMutex
	closed    bool
}

var _ pipeline.Evaluator = (*Host)(nil)

// New loads, verifies and starts every configured plugin.
func New(cfg Config) (*Host, error) {
	if cfg.Catalog == nil {
		return nil, errors.New("host: Config.Catalog is required (the node's generated schema catalog)")
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = 10 * time.Second
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = 10 * time.Second
	}
	if cfg.RestartMin <= 0 {
		cfg.RestartMin = 100 * time.Millisecond
	}
	if cfg.RestartMax < cfg.RestartMin {
		cfg.RestartMax = max(10*time.Second, cfg.RestartMin)
	}
	if cfg.LogOutput == nil {
		cfg.LogOutput = os.Stderr
	}
	h := &Host{
		cfg:    cfg,
		logger: hclog.New(&hclog.LoggerOptions{Name: "writ-plugin-host", Output: cfg.LogOutput, Level: hclog.Warn}),
		route:  map[string]*instance{},
		stop:   make(chan struct{}),
	}
	fail := func(err error) (*Host, error) {
		h.Close()
		return nil, err
	}
	for i, pc := range cfg.Plugins {
		if pc.Path == "" {
			return fail(fmt.Errorf("host: plugins[%d]: path is empty; set the plugin binary's path", i))
		}
		abs, err := filepath.Abs(pc.Path)
		if err != nil {
			return fail(fmt.Errorf("host: plugin %s: %w", pc.Path, err))
		}
		pc.Path = abs
		sum, err := hex.DecodeString(strings.TrimSpace(pc.SHA256))
		if err != nil || len(sum) != sha256.Size {
			return fail(fmt.Errorf("host: plugin %s: sha256 %q is not 64 hex digits; set it to the output of `sha256sum %s`", pc.Path, pc.SHA256, pc.Path))
		}
		p, err := h.launch(pc, sum)
		if err != nil {
			return fail(err)
		}
		inst := &instance{h: h, cfg: pc, sum: sum, desc: p.desc}
		inst.adopt(p)
		h.plugins = append(h.plugins, inst)
	}
	for _, inst := range h.plugins {
		for _, t := range inst.desc.types {
			if other, dup := h.route[t]; dup {
				return fail(fmt.Errorf("host: entry type %q is served by both plugin %s and plugin %s; exactly one plugin may serve a type", t, other.label(), inst.label()))
			}
			h.route[t] = inst
		}
	}
	var missing []string
	for _, t := range cfg.Catalog.Types() {
		if NeedsHandler(t) && h.route[t.Name] == nil {
			missing = append(missing, fmt.Sprintf("%s (%s)", t.Name, t.Class))
		}
	}
	if len(missing) > 0 {
		return fail(fmt.Errorf("host: no loaded plugin serves entry type(s) %s; every request and fact type needs exactly one handler plugin", strings.Join(missing, ", ")))
	}
	h.wg.Add(1)
	go h.monitor()
	return h, nil
}

// Close stops every plugin process and the restart machinery.
func (h *Host) Close() error {
	h.closeOnce.Do(func() {
		h.mu.Lock()
		h.closed = true
		h.mu.Unlock()
		close(h.stop)
		var kills sync.WaitGroup
		for _, inst := range h.plugins {
			inst.mu.Lock()
			c, cmd := inst.client, inst.cmd
			inst.healthy = false
			inst.lastErr = "host closed"
			inst.dropIdle()
			inst.mu.Unlock()
			if c != nil {
				kills.Add(1)
				go func() {
					defer kills.Done()
					stopGracefully(c, cmd)
				}()
			}
		}
		kills.Wait()
		h.wg.Wait()
	})
	return nil
}

// Status reports every loaded plugin, in configuration order.
func (h *Host) Status() []Status {
	out := make([]Status, 0, len(h.plugins))
	for _, inst := range h.plugins {
		inst.mu.Lock()
		out = append(out, Status{
			Name:      inst.desc.name,
			Version:   inst.desc.version,
			Path:      inst.cfg.Path,
			Types:     append([]string(nil), inst.desc.types...),
			Healthy:   inst.healthy,
			Restarts:  inst.restarts,
			LastError: inst.lastErr,
			PID:       inst.pid,
		})
		inst.mu.Unlock()
	}
	return out
}

// monitor notices plugin processes that exited while idle.
func (h *Host) monitor() {
	defer h.wg.Done()
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-h.stop:
			return
		case <-t.C:
		}
		for _, inst := range h.plugins {
			inst.mu.Lock()
			c, gen, healthy := inst.client, inst.gen, inst.healthy
			inst.mu.Unlock()
			if healthy && c != nil && c.Exited() {
				inst.down(gen, "plugin process exited")
			}
		}
	}
}

// description is what a plugin declared in Describe.
type description struct {
	name, version string
	types         []string
}

// proc is one started and verified plugin process.
type proc struct {
	client *plugin.Client
	cmd    *exec.Cmd
	rpc    pb.HandlerClient
	pid    int
	desc   description
}

// closeGrace is how long Close lets a healthy plugin exit on its own.
const closeGrace = 500 * time.Millisecond

// stopGracefully asks a healthy plugin to shut down and kills it if it has
// not exited within closeGrace.
func stopGracefully(c *plugin.Client, cmd *exec.Cmd) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Kill()
	}()
	select {
	case <-done:
	case <-time.After(closeGrace):
		if cmd != nil && cmd.Process != nil {
			_ = cmd.Process.Kill()
		}
		<-done
	}
}

// stop ends a refused, crashed or hung plugin process at once: handlers are
// pure and hold nothing worth a graceful shutdown. go-plugin then reaps the
// process and releases its connections. (Close stops healthy plugins
// gracefully instead.)
func stop(c *plugin.Client, cmd *exec.Cmd) {
	if cmd != nil && cmd.Process != nil {
		_ = cmd.Process.Kill()
	}
	c.Kill()
}

// tail keeps the last bytes a plugin wrote to stderr, for error messages.
type tail struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > 2048 {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-2048:]...)
	}
	t.mu.Unlock()
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.buf))
}

// launch starts, handshakes and verifies one plugin binary.
func (h *Host) launch(pc PluginConfig, sum []byte) (*proc, error) {
	label := pc.Path
	refuse := func(format string, args ...any) error {
		return fmt.Errorf("host: plugin %s refused: %s", label, fmt.Sprintf(format, args...))
	}
	fi, err := os.Stat(pc.Path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil, refuse("binary does not exist; build it or fix the configured path")
	case err != nil:
		return nil, refuse("cannot read binary: %v", err)
	case !fi.Mode().IsRegular():
		return nil, refuse("not a regular file (mode %v)", fi.Mode())
	case fi.Mode().Perm()&0o111 == 0:
		return nil, refuse("binary is not executable (mode %v); chmod +x it", fi.Mode().Perm())
	}
	versioned := map[int]plugin.PluginSet{}
	for _, v := range ProtocolVersions {
		versioned[v] = plugin.PluginSet{pb.PluginName: &grpcPlugin{}}
	}
	stderr := &tail{}
	cmd := newCmd(pc.Path, pc.Args)
	cmd.Env = pluginEnv(os.Environ())
	client := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig: plugin.HandshakeConfig{
			ProtocolVersion:  pb.ProtocolVersion,
			MagicCookieKey:   pb.MagicCookieKey,
			MagicCookieValue: pb.MagicCookieValue,
		},
		VersionedPlugins: versioned,
		Cmd:              cmd,
		SkipHostEnv:      true,
		SecureConfig:     &plugin.SecureConfig{Checksum: sum, Hash: sha256.New()},
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		AutoMTLS:         true,
		StartTimeout:     h.cfg.StartTimeout,
		Stderr:           io.MultiWriter(stderr, h.cfg.LogOutput),
		Logger:           h.logger,
		GRPCDialOptions:  dialOptions,
	})
	rpcc, err := client.Client()
	if err != nil {
		stop(client, cmd) // also waits for go-plugin's stderr reader: the tail is complete
		return nil, h.classifyStartError(refuse, err, pc, sum, stderr)
	}
	raw, err := rpcc.Dispense(pb.PluginName)
	if err != nil {
		stop(client, cmd)
		return nil, refuse("dispense %q: %v", pb.PluginName, err)
	}
	hc, ok := raw.(pb.HandlerClient)
	if !ok {
		stop(client, cmd)
		return nil, refuse("dispensed %T, not a handler client", raw)
	}
	ctx, cancel := context.WithTimeout(context.Background(), h.cfg.StartTimeout)
	defer cancel()
	d, err := hc.Describe(ctx, &pb.DescribeRequest{ProtocolVersion: uint32(client.NegotiatedVersion())})
	if err != nil {
		stop(client, cmd)
		return nil, refuse("describe failed: %v", err)
	}
	if d.Name != "" {
		label = fmt.Sprintf("%q (%s)", d.Name, pc.Path)
	}
	if err := h.checkDescription(d, client.NegotiatedVersion()); err != nil {
		stop(client, cmd)
		return nil, refuse("%v", err)
	}
	types := append([]string(nil), d.Types...)
	sort.Strings(types)
	p := &proc{client: client, cmd: cmd, rpc: hc, desc: description{name: d.Name, version: d.Version, types: types}}
	if rc := client.ReattachConfig(); rc != nil {
		p.pid = rc.Pid
	}
	return p, nil
}

func (h *Host) classifyStartError(refuse func(string, ...any) error, err error, pc PluginConfig, sum []byte, stderr *tail) error {
	msg := err.Error()
	switch {
	case errors.Is(err, plugin.ErrChecksumsDoNotMatch):
		actual := "unknown"
		if b, rerr := os.ReadFile(pc.Path); rerr == nil {
			s := sha256.Sum256(b)
			actual = hex.EncodeToString(s[:])
		}
		return refuse("checksum mismatch: binary has sha256 %s, configuration expects %s; rebuild the plugin or update the configured sha256", actual, hex.EncodeToString(sum))
	case strings.Contains(msg, "exited before we could connect") || strings.Contains(msg, "Failed to read any lines from plugin's stdout"):
		return refuse("exited before the handshake (is it a writ handler plugin built with plugins/sdk?); its stderr: %q", stderr.String())
	case strings.Contains(msg, "Unrecognized remote plugin message"):
		first := strings.TrimSpace(strings.TrimPrefix(strings.SplitN(msg, "\n", 2)[0], "Unrecognized remote plugin message:"))
		return refuse("wrote to stdout before the go-plugin handshake (first line %q); a handler must not print to stdout, log to stderr instead", first)
	case strings.Contains(msg, "incompatible API version"):
		return refuse("speaks another handler protocol version (%s); this host speaks version(s) %v; rebuild the plugin with a compatible plugins/sdk", msg, ProtocolVersions)
	case strings.Contains(msg, "timeout while waiting for plugin to start"):
		return refuse("did not complete the handshake within %s", h.cfg.StartTimeout)
	}
	return refuse("start failed: %v", err)
}

func (h *Host) checkDescription(d *pb.DescribeResponse, negotiated int) error {
	if int(d.ProtocolVersion) != negotiated {
		return fmt.Errorf("declares protocol version %d but negotiated %d", d.ProtocolVersion, negotiated)
	}
	if d.Name == "" {
		return errors.New("declares no name; set sdk.Plugin.Name")
	}
	if want := h.cfg.Catalog.Fingerprint(); d.Fingerprint != want {
		return fmt.Errorf("was built against schema fingerprint %q but this node runs schema %q; rebuild the plugin against the node's schema", d.Fingerprint, want)
	}
	if len(d.Types) == 0 {
		return errors.New("serves no entry types")
	}
	seen := map[string]bool{}
	for _, t := range d.Types {
		desc, ok := h.cfg.Catalog.Type(t)
		switch {
		case seen[t]:
			return fmt.Errorf("declares entry type %q twice", t)
		case !ok:
			return fmt.Errorf("serves entry type %q, which the schema does not declare", t)
		case desc.Class == ir.ClassReceipt:
			item := "the item type"
			if desc.Entry != nil && desc.Entry.Item != "" {
				item = fmt.Sprintf("%q", desc.Entry.Item)
			}
			return fmt.Errorf("serves receipt type %q; receipts are never evaluated, their items are (serve %s instead)", t, item)
		}
		seen[t] = true
	}
	return nil
}

type grpcPlugin struct {
	plugin.NetRPCUnsupportedPlugin
}

func (grpcPlugin) GRPCServer(*plugin.GRPCBroker, *grpc.Server) error {
	return errors.New("host: the host side serves no plugin")
}

func (grpcPlugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return pb.NewHandlerClient(c), nil
}

// restartPolicy is the delay between a plugin's crash and its restart, and
// between failed restarts.
func (h *Host) restartPolicy() backoff.Policy {
	return backoff.Policy{Min: h.cfg.RestartMin, Max: h.cfg.RestartMax}
}
