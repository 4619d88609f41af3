package node

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/membership"
	"github.com/writ-dev/writ/node/config"
	"github.com/writ-dev/writ/pipeline"
	"github.com/writ-dev/writ/pki"
	"github.com/writ-dev/writ/plugins/host"
	"github.com/writ-dev/writ/raftstore"
	"github.com/writ-dev/writ/schema/ir"
	"github.com/writ-dev/writ/version"
)

// Version is reported in Status and gossip tags (see package version).
var Version = version.Get().Version

// Options are what the caller supplies besides the configuration.
type Options struct {
	Catalog ir.Catalog
	// LogOutput receives structured logs (default os.Stderr).
	LogOutput io.Writer
	// PluginName, if set, is a plugin binary searched next to the
	// executable and on PATH when no plugins are configured (writd sets
	// writ-jobs for the embedded jobs schema).
	PluginName string

	started func(*Node)
}

// Node is one running writd.
type Node struct {
	cfg     *config.Node
	cat     ir.Catalog
	log     *slog.Logger
	level   *slog.LevelVar
	dataDir string
	tempDir bool

	host *host.Host
	pl   *pipeline.Pipeline
	rs   *raftstore.Node
	// peerTLS is the raft transport's certificate material (nil: plaintext).
	peerTLS *pki.Reloader
	// apiTLS is the client API's certificate material (nil: plaintext).
	apiTLS  *pki.Reloader
	mem     *membership.Agent
	gs      *grpc.Server
	apis    *api.Server
	apiAuth *api.Auth
	lis     net.Listener
	obs     obsState
	catchUp catchUps
	sch     *schemas
	// replay bounds Watch streams replaying history at once (replay.go).
	replay replaySlots

	mu      sync.Mutex
	current *config.Node
	restart []string
	cfgTag  string

	stopOnce sync.Once
	done     chan struct{}
	fatal    chan error
}

// StartError is a start-up failure: one line naming what and the fix.
type StartError struct{ Msg string }

func (e *StartError) Error() string { return e.Msg }

func startErr(format string, a ...any) error { return &StartError{Msg: fmt.Sprintf(format, a...)} }

// Start brings up a node. On error nothing is left running.
func Start(cfg *config.Node, o Options) (n *Node, err error) {
	if o.Catalog == nil {
		return nil, errors.New("node: Options.Catalog is required")
	}
	if o.LogOutput == nil {
		o.LogOutput = os.Stderr
	}
	n = &Node{cfg: cfg, cat: withClusterConfig(o.Catalog), level: new(slog.LevelVar), current: cfg, done: make(chan struct{}), fatal: make(chan error, 4), replay: newReplaySlots()}
	n.level.Set(parseLevel(cfg.LogLevel))
	hopts := &slog.HandlerOptions{Level: n.level}
	var h slog.Handler = slog.NewTextHandler(o.LogOutput, hopts)
	if cfg.LogFormat == "json" {
		h = slog.NewJSONHandler(o.LogOutput, hopts)
	}
	n.log = slog.New(uniqueKeys(h)).With("node", cfg.NodeID)
	n.initObs(cfg)
	// Configuration warnings first: a start that fails later still shows
	// them.
	for _, w := range cfg.Warnings {
		n.log.Warn("writd: " + w)
	}

	var cleanup []func()
	defer func() {
		if err != nil {
			for i := len(cleanup) - 1; i >= 0; i-- {
				cleanup[i]()
			}
		}
	}()

	// 1. data dir and listeners
	n.dataDir = cfg.DataDir
	if n.dataDir == "" {
		d, err := os.MkdirTemp("", "writd-"+cfg.NodeID+"-")
		if err != nil {
			return nil, startErr("cannot create a temporary data directory: %v: set data_dir", err)
		}
		n.dataDir, n.tempDir = d, true
		cleanup = append(cleanup, func() { _ = os.RemoveAll(d) })
	}
	if err := os.MkdirAll(n.dataDir, 0o700); err != nil {
		return nil, startErr("data_dir %s: %v: point data_dir at a writable directory", n.dataDir, err)
	}
	if c, err := privateTree(n.dataDir); err != nil {
		return nil, startErr("data_dir %s: %v: make it and its files owned by this user", n.dataDir, err)
	} else if c > 0 {
		n.log.Warn("writd: data_dir was readable by group or others: narrowed to 0700 (directories) and 0600 (files)", "data_dir", n.dataDir, "entries", c)
	}
	lis, err := net.Listen("tcp", cfg.APIAddr)
	if err != nil {
		return nil, startErr("api.addr %s: %v: stop whatever uses it or set api.addr (flag --api-addr)", cfg.APIAddr, unwrapNet(err))
	}
	n.lis = lis
	cleanup = append(cleanup, func() { _ = lis.Close() })
	if err := probeTCP(cfg.RaftAddr); err != nil {
		return nil, startErr("raft.addr %s: %v: stop whatever uses it or set raft.addr (flag --raft-addr)", cfg.RaftAddr, err)
	}
	if err := probeGossip(cfg.GossipAddr); err != nil {
		return nil, startErr("gossip.addr %s: %v: stop whatever uses it or set gossip.addr (flag --gossip-addr)", cfg.GossipAddr, err)
	}

	// A configuration activated earlier (W5) overrides the file's settings.
	if c, err := loadActivated(n.dataDir); err != nil {
		return nil, startErr("data_dir %s: %v", n.dataDir, err)
	} else if c != nil {
		cfg = config.ApplyAll(cfg, c)
		n.cfg, n.current, n.cfgTag = cfg, cfg, c.Version
		n.level.Set(parseLevel(cfg.LogLevel))
		n.log.Info("writd: using the activated cluster configuration", "version", c.Version)
	}

	// A start on a schema BLOCKED-incompatible with the one this data
	// directory ran is refused (rolling.go).
	if n.sch, err = newSchemas(n.cat); err != nil {
		return nil, startErr("schema: %v", err)
	}
	if err := n.sch.checkLocal(n.dataDir); err != nil {
		return nil, err
	}

	// 2. plugins
	plugins, err := n.pluginConfigs(o.PluginName)
	if err != nil {
		return nil, err
	}
	n.host, err = host.New(host.Config{Plugins: plugins, Catalog: n.cat, LogOutput: &slogWriter{l: n.log.With("component", "plugin")}})
	if err != nil {
		if len(plugins) == 0 {
			return nil, startErr("plugins: none configured: %v: configure them with --plugin PATH[=SHA256] (or plugins: [{path, sha256}] in the file)", err)
		}
		return nil, startErr("plugins: %v", err)
	}
	host := n.host // n is nil by the time a failed Start runs its cleanup
	cleanup = append(cleanup, func() { _ = host.Close() })

	// 3. pipeline
	n.pl, err = pipeline.New(pipeline.Config{
		NodeID: cfg.NodeID, Catalog: n.cat, Evaluator: n.evaluator(n.host), Metrics: n.pipelineMetrics(), DataDir: filepath.Join(n.dataDir, "outbox"),
		CommitTimeout: cfg.CommitTimeout, ConfigTimeout: cfg.ConfigTimeout, MaxBatch: cfg.MaxBatch, RetryMin: cfg.FactRetry,
		MaxInflight: cfg.MaxInflight, OutboxMaxEntries: cfg.OutboxMaxEntries, OutboxMaxBytes: cfg.OutboxMaxBytes, Logger: n.log.With("component", "pipeline"),
		OnConfigActivated: n.onConfigActivated,
	})
	if err != nil {
		return nil, startErr("pipeline: %v", err)
	}
	pl := n.pl
	cleanup = append(cleanup, func() { _ = pl.Stop() })

	// 4. raftstore
	peerTLS, err := n.loadPeerTLS(cfg)
	if err != nil {
		return nil, err
	}
	n.rs, err = raftstore.Start(raftstore.Config{
		TLS: peerTLS, MaxFrameBytes: cfg.MaxFrameBytes, MaxSnapshotBytes: cfg.MaxSnapshotBytes,
		NodeID: cfg.NodeID, DataDir: filepath.Join(n.dataDir, "raft"), RaftAddr: cfg.RaftAddr, Join: !cfg.Bootstrap,
		TickInterval: cfg.RaftTick, ElectionTicks: cfg.ElectionTicks, HeartbeatTicks: cfg.HeartbeatTicks,
		SnapshotCount: cfg.SnapshotEntries, Checker: n.pl.Checker(), Observer: n.pl, Metrics: n.raftMetrics(), Logger: n.log.With("component", "raft"),
	})
	if err != nil {
		return nil, startErr("raft: %v", err)
	}
	cleanup = append(cleanup, n.rs.Stop)
	n.pl.SetLog(n.rs) // *raftstore.Node is also a pipeline.StateReader
	if err := n.pl.Start(context.Background()); err != nil {
		return nil, startErr("pipeline: %v", err)
	}

	// 5. membership
	ghost, gport, _ := net.SplitHostPort(cfg.GossipAddr)
	port, _ := strconv.Atoi(gport)
	ekey, keyring, err := gossipKeys(encodeKey(cfg.GossipKey), n.dataDir)
	if err != nil {
		return nil, startErr("%v", err)
	}
	if keyring != "" && ekey == "" {
		n.log.Info("writd: gossip keys from the node's keyring (kept across key rotations)", "keyring", keyring)
	}
	n.mem, err = membership.Start(membership.Config{
		NodeID: cfg.NodeID, BindAddr: ghost, BindPort: port, Seeds: cfg.Join,
		RaftAddr: n.rs.Addr(), APIAddr: lis.Addr().String(), Fingerprint: n.cat.Fingerprint(), Version: Version,
		Profile: cfg.GossipProfile, EncryptKey: ekey, KeyringFile: keyring, SnapshotPath: filepath.Join(n.dataDir, "serf.snapshot"),
		FailedGrace: cfg.FailedGrace, ManualPromote: !cfg.AutoPromote, Admit: n.sch.admit, Logger: n.log.With("component", "membership"),
	}, n.rs)
	if err != nil {
		return nil, startErr("%s", oneLine("membership", err))
	}
	mem := n.mem
	n.sch.setView(mem.View)
	cleanup = append(cleanup, func() { _ = mem.Shutdown() })

	// 6. API
	as, err := newAPIServer(cfg, lis, n.log.With("component", "api"))
	if err != nil {
		return nil, err
	}
	n.watchAPITLS(as.tls, cfg.API.CertFile)
	n.apiAuth = as.auth
	n.apis, err = api.New(api.Config{Writer: &writer{n: n}, Store: n.rs, Info: &info{n: n}, Membership: &members{a: n.mem}, Schema: n.sch.serve, Gate: n.sch.gate, Logger: n.log.With("component", "api"),
		ForwardCreds: as.forward, Reflection: cfg.Dev || cfg.API.Reflection, Intercept: as.auth.Unary, MaxStreamCalls: cfg.API.MaxStreamCalls,
		NoForwardStream: !cfg.API.ForwardStream})
	if err != nil {
		return nil, err
	}
	n.gs = grpc.NewServer(append(as.opts, grpc.InTapHandle(n.tapAdmit))...)
	n.apis.Register(n.gs)
	if err := n.startObs(cfg); err != nil {
		return nil, err
	}
	cleanup = append(cleanup, n.stopObs)
	if err := n.sch.recordLocal(n.dataDir); err != nil {
		return nil, err
	}
	go func() {
		if err := n.gs.Serve(as.lis); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			n.fatal <- fmt.Errorf("api: %w", err)
		}
	}()
	n.watchStorage()
	go n.watchRefusal()
	n.log.Info("writd: started", "api", n.APIAddr(), "raft", n.rs.Addr(), "gossip", n.mem.Addr(), "data_dir", n.dataDir, "bootstrap", cfg.Bootstrap)
	return n, nil
}

// Fatal delivers errors after which the node cannot continue (raft storage
// failure, a fact outbox write or fsync failure, API server failure).
func (n *Node) Fatal() <-chan error { return n.fatal }

// APIAddr is the bound API address.
func (n *Node) APIAddr() string { return n.lis.Addr().String() }

// RaftAddr is the bound raft address.
func (n *Node) RaftAddr() string { return n.rs.Addr() }

// GossipAddr is the advertised gossip address.
func (n *Node) GossipAddr() string { return n.mem.Addr() }

// DataDir is the node's data directory; TempDir reports whether it is a
// dev-mode temporary directory.
func (n *Node) DataDir() string { return n.dataDir }

// TempDir reports whether the data directory is a fresh temporary one.
func (n *Node) TempDir() bool { return n.tempDir }

// Stop shuts the node down without leaving the cluster.
func (n *Node) Stop() { _ = n.stop(false) }

// Leave announces a graceful departure, then shuts down. It first stops
// taking calls and waits, up to membership.leave_drain_timeout, for the fact outbox to
// drain; when facts remain it does not leave (an *UndrainedError): it stops
// as a member, as Stop does, and a restart delivers them.
func (n *Node) Leave() error { return n.stop(true) }

func (n *Node) stop(leave bool) (err error) {
	n.stopOnce.Do(func() {
		close(n.done)
		n.stopObs()
		// A leader hands leadership over first (as etcd does on a graceful
		// stop): the cluster keeps committing, and this node's in-flight
		// requests commit under the new leader instead of waiting out an
		// election and their commit timeout.
		if n.rs.IsLeader() {
			n.transferLeadership()
		}
		// stop taking new calls, give in-flight ones a moment (Write
		// streams answer what they took and end, telling their clients
		// that anything unanswered was not processed)
		n.apis.Drain()
		stopped := make(chan struct{})
		go func() { n.gs.GracefulStop(); close(stopped) }()
		select {
		case <-stopped:
		case <-time.After(3 * time.Second):
			n.gs.Stop()
		}
		n.apis.Close()
		if leave {
			start := time.Now()
			if left := n.drainOutbox(n.cfg.LeaveDrainTimeout); left > 0 {
				err = &UndrainedError{Facts: left, Waited: time.Since(start).Round(time.Second)}
				n.log.Error("writd: not leaving: the fact outbox did not drain", "facts", left, "err", err)
				leave = false
			}
		}
		if leave {
			if n.rs.IsLeader() {
				// it became leader again meanwhile
				n.transferLeadership()
			}
			if err := n.mem.Leave(); err != nil {
				n.log.Warn("writd: leave", "err", err)
			}
			// give the leader a moment to remove us while raft still runs
			// (it waits out membership's left grace first: 2 s in the
			// local profile, 5 s in lan)
			n.waitRemoved(15 * time.Second)
		} else if err := n.mem.Shutdown(); err != nil {
			n.log.Warn("writd: gossip shutdown", "err", err)
		}
		if err := n.pl.Stop(); err != nil {
			n.log.Warn("writd: pipeline stop", "err", err)
		}
		n.rs.Stop()
		if err := n.host.Close(); err != nil {
			n.log.Warn("writd: plugins stop", "err", err)
		}
		n.log.Info("writd: stopped", "left_cluster", leave)
	})
	return err
}

func (n *Node) transferLeadership() {
	for _, m := range n.rs.Members() {
		if m.ID != n.cfg.NodeID && m.Voter {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			err := n.rs.TransferLeadership(ctx, m.ID)
			cancel()
			if err == nil {
				n.log.Info("writd: transferred leadership", "to", m.ID)
				return
			}
		}
	}
}

func (n *Node) waitRemoved(d time.Duration) {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		select {
		case <-n.rs.Done():
			return // stopped: it applied its removal, or a peer told it
		default:
		}
		in := false
		for _, m := range n.rs.Members() {
			if m.ID == n.cfg.NodeID {
				in = true
			}
		}
		if !in || len(n.rs.Members()) <= 1 {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (n *Node) pluginConfigs(name string) ([]host.PluginConfig, error) {
	configured := n.cfg.Plugins
	if len(configured) == 0 && name != "" {
		if p := findPlugin(name); p != "" {
			configured = []config.Plugin{{Path: p}}
		} else {
			return nil, startErr("plugins: the %s handler plugin was not found next to writd or on PATH: run `make build` (it puts both in bin/) or set plugins (flag --plugin PATH[=SHA256])", name)
		}
	}
	var out []host.PluginConfig
	for _, p := range configured {
		abs, err := filepath.Abs(p.Path)
		if err != nil {
			return nil, startErr("plugins: %s: %v", p.Path, err)
		}
		// "" pins the binary as found now (it is still verified at every
		// later launch).
		sum := strings.ToLower(p.SHA256)
		if sum == "" {
			pin, err := config.PinPlugin(abs)
			if err != nil {
				return nil, startErr("plugins: %v: check the plugins list (flag --plugin)", err)
			}
			sum = pin.SHA256
			if n.cfg.RequirePinnedPlugins {
				// Found next to writd or on PATH: no configured pin
				// (config refuses an unpinned configured one).
				return nil, startErr("plugins: not set, and writd found %s without a pinned sha256 (now %s); outside dev mode writd does not trust a plugin on first use: verify the binary, then set plugins: [{path: %s, sha256: HEX}] (flag --plugin %s=HEX), or set insecure: true", abs, sum, abs, abs)
			}
			if !n.cfg.Dev && len(n.cfg.Plugins) == 0 {
				n.log.Warn("writd: insecure: plugin found next to writd or on PATH is not pinned by sha256: trusted as found at this start (docs/security.md)", "plugin", abs, "sha256", sum)
			}
		}
		out = append(out, host.PluginConfig{Path: abs, SHA256: sum})
	}
	return out, nil
}

// findPlugin looks for a plugin binary next to the executable, then on PATH.
func findPlugin(name string) string {
	if exe, err := os.Executable(); err == nil {
		cand := filepath.Join(filepath.Dir(exe), name)
		if fi, err := os.Stat(cand); err == nil && !fi.IsDir() {
			return cand
		}
	}
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	return ""
}

// gossipKeys decides how membership gets its gossip keys. With encryption
// on (gossip.key set) the keyring lives in the data directory so key
// rotations (writctl keyring) survive a restart. The first start creates it
// from gossip.key. Later starts with the same gossip.key leave it as the
// rotations left it (gossip.key may name a retired key by then). A start
// with a different gossip.key — an operator handing a node that missed a
// rotation the current key — makes that key primary, keeping the others.
// The key the keyring was last seeded from is remembered (as a SHA-256) in
// serf.keyring.seed.
func gossipKeys(key, dataDir string) (encryptKey, keyringFile string, err error) {
	if key == "" {
		return "", "", nil
	}
	f := filepath.Join(dataDir, "serf.keyring")
	seedFile := f + ".seed"
	sum := sha256.Sum256([]byte(key))
	seed := hex.EncodeToString(sum[:])
	data, rerr := os.ReadFile(f)
	if errors.Is(rerr, os.ErrNotExist) {
		if err := os.WriteFile(seedFile, []byte(seed+"\n"), 0o600); err != nil {
			return "", "", fmt.Errorf("node: gossip keyring seed: %w", err)
		}
		return key, f, nil
	}
	if rerr != nil {
		return "", "", fmt.Errorf("node: gossip keyring %s: %w", f, rerr)
	}
	if old, _ := os.ReadFile(seedFile); strings.TrimSpace(string(old)) == seed {
		return "", f, nil
	}
	var keys []string
	if err := json.Unmarshal(data, &keys); err != nil {
		return "", "", fmt.Errorf("node: gossip keyring %s is not a JSON array of base64 keys (%v): fix or delete it (it is recreated from gossip.key)", f, err)
	}
	out := []string{key}
	for _, k := range keys {
		if k != key {
			out = append(out, k)
		}
	}
	b, _ := json.MarshalIndent(out, "", "  ")
	tmp := f + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return "", "", fmt.Errorf("node: gossip keyring: %w", err)
	}
	if err := os.Rename(tmp, f); err != nil {
		return "", "", fmt.Errorf("node: gossip keyring: %w", err)
	}
	if err := os.WriteFile(seedFile, []byte(seed+"\n"), 0o600); err != nil {
		return "", "", fmt.Errorf("node: gossip keyring seed: %w", err)
	}
	return "", f, nil
}

func encodeKey(k []byte) string {
	if len(k) == 0 {
		return ""
	}
	return base64Std(k)
}

func parseLevel(s string) slog.Level {
	switch s {
	case "debug":
		return slog.LevelDebug
	case "warn":
		return slog.LevelWarn
	case "error":
		return slog.LevelError
	}
	return slog.LevelInfo
}

func unwrapNet(err error) error {
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Err != nil {
		var se *os.SyscallError
		if errors.As(oe.Err, &se) {
			return se.Err
		}
		return oe.Err
	}
	return err
}

func probeTCP(addr string) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return unwrapNet(err)
	}
	return l.Close()
}

func probeGossip(addr string) error {
	if err := probeTCP(addr); err != nil {
		return err
	}
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		return unwrapNet(err)
	}
	return pc.Close()
}

// onConfigActivated is the reload hook: it runs on every node only after a
// configuration activation applied (W5).
func (n *Node) onConfigActivated(a pipeline.ConfigActivation) {
	if a.Type != config.ClusterType {
		n.onUserConfigActivated(a)
		return
	}
	c, err := config.ParseCluster(a.Doc, "json")
	if err != nil {
		n.log.Error("writd: activated configuration does not parse; keeping current settings", "id", a.ID, "err", err)
		return
	}
	if err := saveActivated(n.dataDir, a.Doc); err != nil {
		n.log.Error("writd: cannot persist the activated configuration; it applies until restart", "err", err)
	}
	n.mu.Lock()
	next, restart := config.Apply(n.current, c)
	n.current = next
	n.restart = dedup(append(n.restart, restart...))
	n.cfgTag = c.Version
	n.mu.Unlock()
	n.level.Set(parseLevel(next.LogLevel))
	n.pl.SetMaxInflight(next.MaxInflight)
	n.log.Info("writd: configuration activated", "id", a.ID, "version", c.Version, "generation", a.Generation, "index", a.Index, "restart_required", restart)
}

const activatedFile = "cluster-activated.json"

// loadActivated reads the configuration this node saw activate last.
func loadActivated(dir string) (*config.Cluster, error) {
	b, err := os.ReadFile(filepath.Join(dir, activatedFile))
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return config.ParseCluster(b, "json")
}

// saveActivated persists an activated document atomically (write, fsync,
// rename, fsync dir); it is called only from the activation hook.
func saveActivated(dir string, doc []byte) error {
	if err := writeFileSync(filepath.Join(dir, activatedFile), doc); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

func dedup(l []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, x := range l {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}

// The raft node reads an entry's keys in one read transaction.
var _ pipeline.StateReader = (*raftstore.Node)(nil)
