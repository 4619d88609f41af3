package config

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cast"
	"github.com/spf13/pflag"
	"github.com/spf13/viper"
)

// Kind is a key's value type.
type Kind uint8

// Value kinds.
const (
	String Kind = iota + 1
	Duration
	Int
	Bool
	List
	// Plugins is a list of handler plugins: {path, sha256} maps in a file,
	// PATH[=SHA256] strings in flags and the environment.
	Plugins
)

// Key declares one configuration key.
type Key struct {
	Name    string
	Kind    Kind
	Default any
	Help    string
	// FlagName overrides the flag name derived from Name.
	FlagName string
	// Min and Max bound an Int (as a number) or a Duration (in
	// nanoseconds, written with the D helper) key. The same bounds apply
	// to a cluster setting that overrides the key (Setting.NodeKey).
	Min, Max int64
}

// D writes a duration bound in a Key or Setting.
func D(d time.Duration) int64 { return int64(d) }

// Flag is the key's command-line flag name.
func (k Key) Flag() string {
	if k.FlagName != "" {
		return k.FlagName
	}
	return strings.NewReplacer(".", "-", "_", "-").Replace(k.Name)
}

// Env is the key's environment variable name.
func (k Key) Env() string {
	return "WRIT_" + strings.ToUpper(strings.NewReplacer(".", "_").Replace(k.Name))
}

// Keys is every configuration key writd understands.
var Keys = []Key{
	{Name: "node.id", Kind: String, Default: "node1", Help: "unique node ID ([a-z0-9][a-z0-9_.-]{0,62})"},
	{Name: "data_dir", Kind: String, Default: "", Help: "data directory (empty: a fresh temporary directory, dev mode)"},
	{Name: "bootstrap", Kind: Bool, Default: false, Help: "start a new cluster with this node as its only voter (implied when join is not set; refused together with join)"},
	{Name: "join", Kind: List, Default: []string{}, Help: "gossip addresses (host:port) of nodes to join"},
	{Name: "api.addr", Kind: String, Default: "127.0.0.1:7070", Help: "client gRPC listen address (host:port; port 0 picks one)"},
	{Name: "raft.addr", Kind: String, Default: "127.0.0.1:7071", Help: "raft peer transport address (host:port)"},
	{Name: "gossip.addr", Kind: String, Default: "127.0.0.1:7072", Help: "serf gossip address (host:port)"},
	{Name: "gossip.key", Kind: String, Default: "", Help: "base64 gossip encryption key of 16, 24 or 32 bytes (empty: no encryption; prefer gossip.key_file)"},
	{Name: "gossip.key_file", Kind: String, Default: "", Help: "file holding the base64 gossip key, readable only by its owner (mode 0600); the recommended way to set the key"},
	{Name: "raft.tick", Kind: Duration, Default: "100ms", Help: "raft tick interval", Min: D(time.Millisecond), Max: D(10 * time.Second)},
	{Name: "raft.election_ticks", Kind: Int, Default: 10, Help: "ticks without a leader before an election", Min: 2, Max: 1000},
	{Name: "raft.heartbeat_ticks", Kind: Int, Default: 1, Help: "ticks between leader heartbeats", Min: 1, Max: 1000},
	{Name: "raft.snapshot_entries", Kind: Int, Default: 10000, Help: "applied entries between snapshots", Min: 10, Max: 10_000_000},
	// Peer transport security and limits (peertls.go).
	{Name: "raft.tls.cert_file", Kind: String, Default: "", Help: "PEM certificate this node presents to its peers; its identity (URI SAN spiffe://writ/node/<node.id>) must be node.id (writ certs node); set with key_file and ca_file (empty: plaintext peers)"},
	{Name: "raft.tls.key_file", Kind: String, Default: "", Help: "PEM private key of raft.tls.cert_file, mode 0600"},
	{Name: "raft.tls.ca_file", Kind: String, Default: "", Help: "PEM CA certificate(s) every peer's certificate must be issued by"},
	{Name: "raft.max_frame_bytes", Kind: Int, Default: 64 << 20, Help: "largest raft transport frame accepted from a peer, refused from its header before it is read (snapshots travel in chunks and are bounded by raft.max_snapshot_bytes)", Min: 34 << 20, Max: 1 << 30},
	{Name: "raft.max_snapshot_bytes", Kind: Int, Default: 4 << 30, Help: "largest snapshot (the encoded state) sent to or received from a peer, and the most bytes of snapshots being received at once; keep it above the state's size, equal on every node", Min: 64 << 20, Max: 1 << 40},
	{Name: "pipeline.commit_timeout", Kind: Duration, Default: "5s", Help: "how long a request waits for commit before UNCERTAIN", Min: D(10 * time.Millisecond), Max: D(10 * time.Minute)},
	{Name: "pipeline.config_timeout", Kind: Duration, Default: "10s", Help: "how long a configuration change may take to stage and activate before it is aborted", Min: D(100 * time.Millisecond), Max: D(10 * time.Minute)},
	{Name: "pipeline.max_batch", Kind: Int, Default: 256, Help: "most entries per proposal", Min: 1, Max: 4096},
	// Admission control: beyond these bounds entries are refused before
	// they are queued or acknowledged.
	{Name: "pipeline.max_inflight", Kind: Int, Default: 512, Help: "most requests in flight on this node; beyond it a request is refused UNAVAILABLE \"overloaded\" (definitely not appended)", Min: 1, Max: 1_000_000},
	{Name: "pipeline.outbox_max_entries", Kind: Int, Default: 100_000, Help: "most facts retained in this node's outbox; beyond it a fact is refused RESOURCE_EXHAUSTED before it is acknowledged", Min: 1, Max: 100_000_000},
	{Name: "pipeline.outbox_max_bytes", Kind: Int, Default: 256 << 20, Help: "most payload bytes retained in this node's outbox; beyond it a fact is refused RESOURCE_EXHAUSTED before it is acknowledged", Min: 1 << 10, Max: 1 << 40},
	{Name: "membership.failed_grace", Kind: Duration, Default: "30s", Help: "how long a failed node stays a voter before removal", Min: 0, Max: D(24 * time.Hour)},
	{Name: "membership.leave_drain_timeout", Kind: Duration, Default: "30s", Help: "on SIGTERM, how long the node waits for its fact outbox to commit before it leaves; facts still held then keep it a member (it stops without leaving, exit 4) so a restart from its data directory delivers them", Min: 0, Max: D(time.Hour)},
	{Name: "membership.auto_promote", Kind: Bool, Default: true, Help: "the raft leader promotes a caught-up learner to voter on its own; false: a joined node stays a learner until an operator runs `writctl members promote ID` (set it on every node: whichever leads decides)"},
	{Name: "membership.profile", Kind: String, Default: "lan", Help: "gossip failure-detection timing: lan (a dead node is noticed in ~5s) or local (~1s, for loopback test clusters)"},
	{Name: "schema.dir", Kind: String, Default: "", FlagName: "schema", Help: "directory of the CUE schema package this node runs (empty: the embedded jobs schema)"},
	{Name: "plugins", Kind: Plugins, Default: []Plugin{}, FlagName: "plugin", Help: "handler plugin as PATH[=SHA256], repeatable; every request and fact type must be served by exactly one (empty with the embedded jobs schema: writ-jobs next to writd, then on PATH)"},
	{Name: "log.level", Kind: String, Default: "info", Help: "debug, info, warn or error"},
	{Name: "log.format", Kind: String, Default: "text", Help: "text or json"},
	{Name: "metrics.addr", Kind: String, Default: "", Help: "HTTP listen address for /metrics, /livez, /readyz and /healthz (host:port; empty: off, or a kernel-chosen loopback port in dev mode)"},
	{Name: "debug.pprof", Kind: Bool, Default: false, Help: "serve net/http/pprof under /debug/pprof/ on the metrics listener"},
	// client API security and limits (apisecurity.go, docs/security.md)
	{Name: "api.tls.cert_file", Kind: String, Default: "", Help: "PEM certificate the client API serves TLS with (empty: plaintext API)"},
	{Name: "api.tls.key_file", Kind: String, Default: "", Help: "PEM private key of api.tls.cert_file, readable only by its owner (mode 0600)"},
	{Name: "api.tls.client_ca_file", Kind: String, Default: "", Help: "PEM CA bundle client certificates are verified against; set, every call needs a client certificate or a token"},
	{Name: "api.tokens_file", Kind: String, Default: "", Help: "YAML file of API identities (name, token_sha256, roles), mode 0600; set, every call needs a token or a client certificate"},
	{Name: "api.reflection", Kind: Bool, Default: false, Help: "serve gRPC server reflection (always on in dev mode)"},
	{Name: "api.max_connections", Kind: Int, Default: 1024, Help: "most concurrent client API connections (more wait to be accepted)", Min: 1, Max: 1 << 20},
	{Name: "api.max_streams", Kind: Int, Default: 256, Help: "most concurrent calls on one client API connection", Min: 1, Max: 1 << 16},
	{Name: "api.max_watchers", Kind: Int, Default: 1024, Help: "most concurrent Watch streams on this node", Min: 1, Max: 1 << 20},
	{Name: "api.max_watchers_per_conn", Kind: Int, Default: 256, Help: "most concurrent Watch streams on one client API connection", Min: 1, Max: 1 << 16},
	{Name: "api.watch_replay_rate", Kind: Int, Default: 10000, Help: "most history events per second a Watch replay sends, per replay slot (one slot per 4 CPUs), so catching-up watchers leave the CPU to writes (0: unpaced)", Min: 0, Max: 10_000_000},
	{Name: "api.keepalive_min_time", Kind: Duration, Default: "10s", Help: "shortest interval between client keepalive pings; a client pinging more often is disconnected", Min: D(time.Second), Max: D(time.Hour)},
	{Name: "insecure", Kind: Bool, Default: false, Help: "allow a multi-node or network-facing node without peer TLS, API TLS or a gossip key (logged as a warning and shown in status)"},
}

func keyByName(name string) (Key, bool) {
	for _, k := range Keys {
		if k.Name == name {
			return k, true
		}
	}
	return Key{}, false
}

// Node is a validated node configuration.
type Node struct {
	NodeID string
	// DataDir is empty in dev mode: writd creates a fresh temporary one.
	DataDir         string
	Bootstrap       bool
	Join            []string
	APIAddr         string
	RaftAddr        string
	GossipAddr      string
	GossipKey       []byte
	RaftTick        time.Duration
	ElectionTicks   int
	HeartbeatTicks  int
	SnapshotEntries uint64
	CommitTimeout   time.Duration
	ConfigTimeout   time.Duration
	MaxBatch        int
	// Admission control bounds (pipeline.max_inflight, outbox_max_*).
	MaxInflight      int
	OutboxMaxEntries int
	OutboxMaxBytes   int64
	FailedGrace      time.Duration
	// LeaveDrainTimeout bounds Leave's wait for the fact outbox to drain.
	LeaveDrainTimeout time.Duration
	// AutoPromote lets the leader promote caught-up learners itself.
	AutoPromote   bool
	GossipProfile string
	// FactRetry is the first pause between fact re-proposals (0: the
	// pipeline's default); set only by an activated cluster configuration.
	FactRetry time.Duration
	// SchemaDir is the CUE schema package the node runs ("" = the caller's
	// catalog; for writd, the embedded jobs schema).
	SchemaDir string
	// Plugins are the configured handler plugins, in order.
	Plugins   []Plugin
	LogLevel  string
	LogFormat string
	// MetricsAddr is the metrics and health listener ("": off); Pprof
	// mounts pprof on it.
	MetricsAddr string
	Pprof       bool

	// RaftTLS is the peer mTLS material (zero: plaintext peers).
	RaftTLS RaftTLS
	// MaxFrameBytes bounds a raft transport frame (raft.max_frame_bytes).
	MaxFrameBytes int
	// MaxSnapshotBytes bounds a snapshot sent or received in chunks
	// (raft.max_snapshot_bytes).
	MaxSnapshotBytes int

	// API is the client API's TLS, authentication and limits.
	API APISecurity
	// Insecure is set when insecure: true allowed a network-facing node
	// without all of peer TLS, API TLS and a gossip key; InsecureMissing
	// names the keys that are missing.
	Insecure        bool
	InsecureMissing []string
	// RequirePinnedPlugins is set outside dev mode for a node that joins a
	// cluster or listens beyond loopback without insecure: true: every
	// plugin needs a configured sha256, one found next to writd too.
	RequirePinnedPlugins bool
	// File is the configuration file used, if any.
	File string
	// Dev is set when no file, variable or flag configured anything.
	Dev bool
	// Warnings are problems that do not stop the node, one line each, for
	// the node to log at start.
	Warnings []string
}

// Plugin is one configured handler plugin binary.
type Plugin struct {
	Path string
	// SHA256 is the expected hex checksum ("" = pin the binary as found at
	// start; it is still verified at every later launch).
	SHA256 string
}

// Error is a configuration problem: one line naming the key, its source and
// the fix.
type Error struct {
	Key    string
	Source string
	Msg    string
	Fix    string
}

func (e *Error) Error() string {
	s := "config: "
	if e.Key != "" {
		s += e.Key
		if e.Source != "" {
			s += " (" + e.Source + ")"
		}
		s += ": "
	}
	s += e.Msg
	if e.Fix != "" {
		s += ": " + e.Fix
	}
	return s
}

// AddFlags registers one flag per node key on fs (plus --config).
func AddFlags(fs *pflag.FlagSet) {
	fs.StringP("config", "c", "", "configuration file (YAML or TOML)")
	for _, k := range Keys {
		help := k.Help + "; env " + k.Env()
		if d := fmt.Sprint(k.Default); d != "" && d != "[]" && d != "false" {
			help += fmt.Sprintf(" (default %s)", d)
		}
		switch k.Kind {
		case Bool:
			fs.Bool(k.Flag(), false, help)
		case List:
			fs.StringSlice(k.Flag(), nil, help)
		case Plugins:
			fs.StringArray(k.Flag(), nil, help)
		default:
			fs.String(k.Flag(), "", help)
		}
	}
}

// Options says where Load reads from.
type Options struct {
	// File is a config file path ("" = none, unless --config is set).
	File string
	// Flags, if non-nil, is a flag set prepared with AddFlags and parsed.
	Flags *pflag.FlagSet
	// Env is the environment (os.Environ() form); nil reads none.
	Env []string
}

type source struct {
	v    *viper.Viper
	from map[string]string // key -> description of where it came from
	file string            // the config file read, if any
}

// Load reads, merges and validates a node configuration.
func Load(o Options) (*Node, error) {
	s := source{v: viper.New(), from: map[string]string{}}
	for _, k := range Keys {
		s.v.SetDefault(k.Name, k.Default)
	}
	file := o.File
	if o.Flags != nil {
		if f := o.Flags.Lookup("config"); f != nil && f.Changed {
			file = f.Value.String()
		}
	}
	configured := false
	if file != "" {
		s.file = file
		fv, err := readFile(file)
		if err != nil {
			return nil, err
		}
		for _, key := range fv.AllKeys() {
			_, ok := keyByName(key)
			if !ok && strings.HasPrefix(key, "plugins.") {
				return nil, &Error{Key: key, Source: "file " + file, Msg: "is no longer a key", Fix: "list handler plugins as plugins: [{path: BIN, sha256: HEX}]"}
			}
			if !ok {
				return nil, &Error{Key: key, Source: "file " + file, Msg: "unknown key", Fix: "remove it or use one of: " + knownList()}
			}
			s.v.Set(key, fv.Get(key))
			s.from[key] = "file " + file
		}
		configured = true
	}
	for _, kvs := range o.Env {
		name, val, _ := strings.Cut(kvs, "=")
		if !strings.HasPrefix(name, "WRIT_") {
			continue
		}
		k, ok := keyByEnv(name)
		if !ok {
			return nil, &Error{Key: name, Source: "environment", Msg: "unknown variable", Fix: "unset it or use one of the WRIT_* names in `writd --help`"}
		}
		if k.Kind == List || k.Kind == Plugins {
			s.v.Set(k.Name, splitList(val))
		} else {
			s.v.Set(k.Name, val)
		}
		s.from[k.Name] = "env " + name
		configured = true
	}
	if o.Flags != nil {
		var ferr error
		o.Flags.Visit(func(f *pflag.Flag) {
			if f.Name == "config" || ferr != nil {
				return
			}
			k, ok := keyByFlag(f.Name)
			if !ok {
				return
			}
			switch k.Kind {
			case List:
				l, err := o.Flags.GetStringSlice(f.Name)
				if err != nil {
					ferr = err
					return
				}
				s.v.Set(k.Name, l)
			case Plugins:
				l, err := o.Flags.GetStringArray(f.Name)
				if err != nil {
					ferr = err
					return
				}
				s.v.Set(k.Name, l)
			case Bool:
				s.v.Set(k.Name, f.Value.String())
			default:
				s.v.Set(k.Name, f.Value.String())
			}
			s.from[k.Name] = "flag --" + f.Name
			configured = true
		})
		if ferr != nil {
			return nil, fmt.Errorf("config: %w", ferr)
		}
	}
	n, err := s.node()
	if err != nil {
		return nil, err
	}
	n.File = file
	n.Dev = !configured
	if err := s.secureByDefault(n); err != nil {
		return nil, err
	}
	if w := configFileWarning(file); w != "" {
		n.Warnings = append(n.Warnings, w)
	}
	return n, nil
}

func readFile(file string) (*viper.Viper, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, &Error{Key: "config", Source: "flag --config", Msg: fmt.Sprintf("cannot read %s: %v", file, unwrapPath(err)), Fix: "point --config at a readable YAML or TOML file"}
	}
	return parseDoc(b, formatOf(file), "file "+file)
}

func formatOf(file string) string {
	switch strings.ToLower(filepath.Ext(file)) {
	case ".toml":
		return "toml"
	case ".yml", ".yaml":
		return "yaml"
	}
	return ""
}

func parseDoc(b []byte, format, where string) (*viper.Viper, error) {
	if format == "" {
		format = "yaml"
		if looksTOML(b) {
			format = "toml"
		}
	}
	if format != "yaml" && format != "toml" {
		return nil, &Error{Key: "config", Source: where, Msg: fmt.Sprintf("unsupported format %q", format), Fix: "use a .yaml, .yml or .toml file"}
	}
	fv := viper.New()
	fv.SetConfigType(format)
	if err := fv.ReadConfig(bytes.NewReader(b)); err != nil {
		return nil, &Error{Key: "config", Source: where, Msg: "cannot parse " + format + ": " + oneLine(err.Error()), Fix: "fix the syntax"}
	}
	return fv, nil
}

var tomlSection = regexp.MustCompile(`(?m)^\s*\[[A-Za-z0-9_.]+\]\s*$|^\s*[A-Za-z0-9_.]+\s*=`)

func looksTOML(b []byte) bool { return tomlSection.Match(b) }

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func unwrapPath(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}

func keyByEnv(name string) (Key, bool) {
	for _, k := range Keys {
		if k.Env() == name {
			return k, true
		}
	}
	return Key{}, false
}

func keyByFlag(name string) (Key, bool) {
	for _, k := range Keys {
		if k.Flag() == name {
			return k, true
		}
	}
	return Key{}, false
}

func knownList() string {
	var names []string
	for _, k := range Keys {
		names = append(names, k.Name)
	}
	return strings.Join(names, ", ")
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// value helpers: each names the key, its source and the fix.

func (s source) where(key string) string {
	if f, ok := s.from[key]; ok {
		return f
	}
	return "default"
}

func (s source) fail(key, msg, fix string) error {
	k, _ := keyByName(key)
	if fix == "" {
		fix = "set " + key
	}
	if k.Name != "" {
		fix += fmt.Sprintf(" (flag --%s, env %s)", k.Flag(), k.Env())
	}
	return &Error{Key: key, Source: s.where(key), Msg: msg, Fix: fix}
}

func (s source) str(key string) (string, error) {
	v, err := cast.ToStringE(s.v.Get(key))
	if err != nil {
		return "", s.fail(key, fmt.Sprintf("%v is not a string", s.v.Get(key)), "")
	}
	return strings.TrimSpace(v), nil
}

func (s source) dur(key string, min, max time.Duration) (time.Duration, error) {
	raw := s.v.Get(key)
	var d time.Duration
	var err error
	switch x := raw.(type) {
	case string:
		d, err = time.ParseDuration(strings.TrimSpace(x))
	case time.Duration:
		d = x
	default:
		err = fmt.Errorf("not a duration")
	}
	if err != nil {
		return 0, s.fail(key, fmt.Sprintf("%q is not a duration", fmt.Sprint(raw)), fmt.Sprintf("write it like \"500ms\" or \"5s\", between %s and %s", min, max))
	}
	if d < min || d > max {
		return 0, s.fail(key, fmt.Sprintf("%s is out of range", d), fmt.Sprintf("use a value between %s and %s", min, max))
	}
	return d, nil
}

func (s source) integer(key string, min, max int) (int, error) {
	raw := s.v.Get(key)
	var i int
	var err error
	if str, ok := raw.(string); ok {
		i, err = strconv.Atoi(strings.TrimSpace(str))
	} else {
		i, err = cast.ToIntE(raw)
	}
	if err != nil {
		return 0, s.fail(key, fmt.Sprintf("%q is not an integer", fmt.Sprint(raw)), fmt.Sprintf("use a whole number between %d and %d", min, max))
	}
	if i < min || i > max {
		return 0, s.fail(key, fmt.Sprintf("%d is out of range", i), fmt.Sprintf("use a whole number between %d and %d", min, max))
	}
	return i, nil
}

// durKey and integerKey read a key within its range from the Keys table.
func (s source) durKey(key string) (time.Duration, error) {
	k, _ := keyByName(key)
	return s.dur(key, time.Duration(k.Min), time.Duration(k.Max))
}

func (s source) integerKey(key string) (int, error) {
	k, _ := keyByName(key)
	return s.integer(key, int(k.Min), int(k.Max))
}

func (s source) boolean(key string) (bool, error) {
	b, err := cast.ToBoolE(s.v.Get(key))
	if err != nil {
		return false, s.fail(key, fmt.Sprintf("%q is not a boolean", fmt.Sprint(s.v.Get(key))), "use true or false")
	}
	return b, nil
}

func (s source) list(key string) ([]string, error) {
	raw := s.v.Get(key)
	if str, ok := raw.(string); ok {
		return splitList(str), nil
	}
	l, err := cast.ToStringSliceE(raw)
	if err != nil {
		return nil, s.fail(key, fmt.Sprintf("%v is not a list of strings", raw), "write a list such as [\"127.0.0.1:7072\"]")
	}
	var out []string
	for _, e := range l {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out, nil
}

var nodeIDRe = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,62}$`)

// CheckAddr validates a host:port listen address. The host must be an IP
// literal or "localhost"; allowZero permits port 0 (kernel-chosen).
func CheckAddr(addr string, allowZero bool) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q is not host:port", addr)
	}
	if host == "" {
		return fmt.Errorf("%q has no host", addr)
	}
	if host != "localhost" && net.ParseIP(host) == nil {
		return fmt.Errorf("host %q is not an IP address", host)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 0 || p > 65535 {
		return fmt.Errorf("port %q is not a number between 0 and 65535", port)
	}
	if p == 0 && !allowZero {
		return fmt.Errorf("port 0 cannot be advertised to peers")
	}
	return nil
}

func (s source) addr(key string, allowZero bool) (string, error) {
	a, err := s.str(key)
	if err != nil {
		return "", err
	}
	if err := CheckAddr(a, allowZero); err != nil {
		fix := "use host:port with an IP address and a port between 1 and 65535"
		if allowZero {
			fix = "use host:port with an IP address and a port between 0 and 65535"
		}
		return "", s.fail(key, err.Error(), fix)
	}
	return a, nil
}

func (s source) node() (*Node, error) {
	n := &Node{}
	var err error
	if n.NodeID, err = s.str("node.id"); err != nil {
		return nil, err
	}
	if !nodeIDRe.MatchString(n.NodeID) {
		return nil, s.fail("node.id", fmt.Sprintf("%q is not a valid node ID", n.NodeID), "use lower-case letters, digits, '-', '_' or '.', starting with a letter or digit, at most 63 characters")
	}
	if n.DataDir, err = s.str("data_dir"); err != nil {
		return nil, err
	}
	if n.DataDir != "" {
		if err := checkDir(n.DataDir); err != nil {
			return nil, s.fail("data_dir", err.Error(), "point data_dir at a directory this user can write, or create it")
		}
		if n.DataDir, err = filepath.Abs(n.DataDir); err != nil {
			return nil, s.fail("data_dir", err.Error(), "")
		}
	}
	if err := s.joinAndBootstrap(n); err != nil {
		return nil, err
	}
	if n.APIAddr, err = s.addr("api.addr", true); err != nil {
		return nil, err
	}
	if n.RaftAddr, err = s.addr("raft.addr", false); err != nil {
		return nil, err
	}
	if n.GossipAddr, err = s.addr("gossip.addr", false); err != nil {
		return nil, err
	}
	seen := map[string]string{}
	for _, k := range []string{"api.addr", "raft.addr", "gossip.addr"} {
		a, _ := s.str(k)
		if other, dup := seen[a]; dup && !strings.HasSuffix(a, ":0") {
			return nil, s.fail(k, fmt.Sprintf("%s is also used by %s", a, other), "give each listener its own port")
		}
		seen[a] = k
	}
	if err := s.gossipKey(n, s.file); err != nil {
		return nil, err
	}
	if err := s.tuning(n); err != nil {
		return nil, err
	}
	if err := s.peerTLS(n); err != nil {
		return nil, err
	}
	if n.SchemaDir, err = s.str("schema.dir"); err != nil {
		return nil, err
	}
	if n.SchemaDir != "" {
		if fi, err := os.Stat(n.SchemaDir); err != nil || !fi.IsDir() {
			msg := n.SchemaDir + " is not a directory"
			if err != nil {
				msg = fmt.Sprintf("%s: %v", n.SchemaDir, unwrapPath(err))
			}
			return nil, s.fail("schema.dir", msg, "point schema.dir at the directory holding the schema's .cue files")
		}
		if n.SchemaDir, err = filepath.Abs(n.SchemaDir); err != nil {
			return nil, s.fail("schema.dir", err.Error(), "")
		}
	}
	if n.Plugins, err = s.plugins("plugins"); err != nil {
		return nil, err
	}
	if err := s.apiSecurity(n); err != nil {
		return nil, err
	}
	return n, nil
}

// tuning reads and validates the raft, pipeline, membership and log keys.
func (s source) tuning(n *Node) error {
	var err error
	if n.RaftTick, err = s.durKey("raft.tick"); err != nil {
		return err
	}
	if n.ElectionTicks, err = s.integerKey("raft.election_ticks"); err != nil {
		return err
	}
	if n.HeartbeatTicks, err = s.integerKey("raft.heartbeat_ticks"); err != nil {
		return err
	}
	if n.HeartbeatTicks >= n.ElectionTicks {
		return s.fail("raft.heartbeat_ticks", fmt.Sprintf("%d is not below raft.election_ticks (%d)", n.HeartbeatTicks, n.ElectionTicks), "make heartbeat_ticks smaller than election_ticks")
	}
	se, err := s.integerKey("raft.snapshot_entries")
	if err != nil {
		return err
	}
	n.SnapshotEntries = uint64(se)
	if n.CommitTimeout, err = s.durKey("pipeline.commit_timeout"); err != nil {
		return err
	}
	if n.ConfigTimeout, err = s.durKey("pipeline.config_timeout"); err != nil {
		return err
	}
	if n.MaxBatch, err = s.integerKey("pipeline.max_batch"); err != nil {
		return err
	}
	if n.MaxInflight, err = s.integerKey("pipeline.max_inflight"); err != nil {
		return err
	}
	if n.OutboxMaxEntries, err = s.integerKey("pipeline.outbox_max_entries"); err != nil {
		return err
	}
	ob, err := s.integerKey("pipeline.outbox_max_bytes")
	if err != nil {
		return err
	}
	n.OutboxMaxBytes = int64(ob)
	if n.FailedGrace, err = s.durKey("membership.failed_grace"); err != nil {
		return err
	}
	if n.LeaveDrainTimeout, err = s.durKey("membership.leave_drain_timeout"); err != nil {
		return err
	}
	if n.AutoPromote, err = s.boolean("membership.auto_promote"); err != nil {
		return err
	}
	if n.GossipProfile, err = s.str("membership.profile"); err != nil {
		return err
	}
	if n.GossipProfile != "lan" && n.GossipProfile != "local" {
		return s.fail("membership.profile", fmt.Sprintf("%q is not a profile", n.GossipProfile), "use lan or local")
	}
	if n.LogLevel, err = s.str("log.level"); err != nil {
		return err
	}
	switch n.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		return s.fail("log.level", fmt.Sprintf("%q is not a level", n.LogLevel), "use debug, info, warn or error")
	}
	if n.LogFormat, err = s.str("log.format"); err != nil {
		return err
	}
	if n.LogFormat != "text" && n.LogFormat != "json" {
		return s.fail("log.format", fmt.Sprintf("%q is not a format", n.LogFormat), "use text or json")
	}
	if n.MetricsAddr, err = s.str("metrics.addr"); err != nil {
		return err
	}
	if n.MetricsAddr != "" {
		if n.MetricsAddr, err = s.addr("metrics.addr", true); err != nil {
			return err
		}
	}
	if n.Pprof, err = s.boolean("debug.pprof"); err != nil {
		return err
	}
	return nil
}

func checkDir(dir string) error {
	fi, err := os.Stat(dir)
	if os.IsNotExist(err) {
		parent := filepath.Dir(filepath.Clean(dir))
		pfi, perr := os.Stat(parent)
		if perr != nil || !pfi.IsDir() {
			return fmt.Errorf("%s does not exist and neither does its parent %s", dir, parent)
		}
		return probeWrite(parent, dir+" does not exist and its parent")
	}
	if err != nil {
		return fmt.Errorf("cannot stat %s: %v", dir, unwrapPath(err))
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory", dir)
	}
	if f, err := os.Open(dir); err != nil {
		return fmt.Errorf("%s is not readable: %v", dir, unwrapPath(err))
	} else {
		_, rerr := f.Readdirnames(1)
		_ = f.Close()
		if rerr != nil && rerr.Error() != "EOF" {
			return fmt.Errorf("%s is not readable: %v", dir, rerr)
		}
	}
	return probeWrite(dir, dir)
}

func probeWrite(dir, what string) error {
	f, err := os.CreateTemp(dir, ".writ-probe-*")
	if err != nil {
		return fmt.Errorf("%s is not writable: %v", what, unwrapPath(err))
	}
	name := f.Name()
	_ = f.Close()
	return os.Remove(name)
}

func checkExec(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return fmt.Errorf("%s: %v", p, unwrapPath(err))
	}
	if fi.IsDir() || fi.Mode()&0o111 == 0 {
		return fmt.Errorf("%s is not an executable file", p)
	}
	return nil
}

// isSHA256Hex reports whether s is a hex-encoded SHA-256 digest.
func isSHA256Hex(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range s {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}
