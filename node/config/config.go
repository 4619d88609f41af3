package config

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"github.com/spf13/viper"
)

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

// value helpers: each names the key, its source and the fix.

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
