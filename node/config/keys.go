package config

import (
	"strings"
	"time"
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
	{Name: "api.max_stream_calls", Kind: Int, Default: 256, Help: "most calls in flight on one Write stream (more wait unread in the client's flow-control window)", Min: 1, Max: 1 << 20},
	{Name: "api.forward_stream", Kind: Bool, Default: true, Help: "a follower forwards writes to the leader on one Write stream (false: one unary call each)"},
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
