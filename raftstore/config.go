package raftstore

import (
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"net"
	"strings"
	"time"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/writ-dev/writ/kv"
	"github.com/writ-dev/writ/pki"
)

// Peer is one member of the initial static configuration.
type Peer struct {
	ID   string // node ID
	Addr string // raft address, host:port
}

// Config configures a Node. Zero values take the documented defaults.
type Config struct {
	// NodeID names this node; it is mapped to raft's uint64 ID by RaftID.
	// A node rebuilt under the same NodeID (new data directory) is told
	// apart from its predecessor by its Incarnation.
	NodeID string
	// DataDir holds wal/, snap/ and state.db.
	DataDir string
	// RaftAddr is the address the peer transport listens on and binds its
	// outgoing connections to (host:port; port 0 picks a free port, and
	// Node.Addr reports it).
	RaftAddr string
	// Listener, if set, is used instead of listening on RaftAddr (tests
	// create listeners first so that a static peer list can name ports).
	Listener net.Listener
	// Peers is the initial static configuration, including this node. Empty
	// (and Join unset) starts a fresh single-node cluster. Ignored when the
	// data directory already holds a log.
	Peers []Peer
	// Join starts a node that waits to be added by the leader (as a
	// learner via AddLearner); it does not bootstrap a configuration.
	Join bool
	// TickInterval is the raft tick (default 50ms).
	TickInterval time.Duration
	// ElectionTicks is the election timeout in ticks (default 12: a leader
	// failure is detected within 0.6–1.2 s on loopback).
	ElectionTicks int
	// HeartbeatTicks is the heartbeat interval in ticks (default 2).
	HeartbeatTicks int
	// SnapshotCount is the number of applied entries between snapshots
	// (default 10000). The log is compacted to SnapshotCatchUp entries
	// behind each snapshot.
	SnapshotCount uint64
	// SnapshotCatchUp is how many entries are kept in the log behind a
	// snapshot for slow followers (default 5000, at most SnapshotCount).
	SnapshotCatchUp uint64
	// MaxBatchBytes bounds one raft append message and one transport frame
	// (default 1 MiB).
	MaxBatchBytes int
	// MaxEntryBytes bounds one log entry (an encoded batch of commands):
	// Propose refuses a larger batch with ErrEntryTooLarge, and a leader
	// refuses a forwarded proposal with a larger entry (default 32 MiB).
	// Keep it equal on every node: a follower also refuses appends of
	// larger entries.
	MaxEntryBytes int
	// MaxFrameBytes bounds one transport frame received from a peer; a
	// larger frame is refused from its header, before it is read or
	// allocated (default 64 MiB; at least MaxEntryBytes + MaxBatchBytes +
	// 64 KiB). Snapshots larger than MaxBatchBytes are sent in chunks of
	// MaxBatchBytes, so they are not bounded by it.
	MaxFrameBytes int
	// MaxSnapshotBytes bounds a snapshot sent to or received from a peer
	// (its encoded state), and the bytes of snapshots being received on
	// all streams at once; a larger one is not sent, and refused when
	// received (default 4 GiB; keep it above the state's size, equal on
	// every node).
	MaxSnapshotBytes int
	// MaxUncommittedBytes bounds the leader's uncommitted log tail; beyond it
	// proposals fail with kv.ErrDropped (default 64 MiB).
	MaxUncommittedBytes uint64
	// SendQueue is the per-peer bound on queued outgoing messages (default
	// 4096); when it is full, messages are dropped and raft retries.
	SendQueue int
	// OutcomeRetention is how many command outcomes the dedup table keeps,
	// oldest forgotten first (default 100000). It must be equal on every
	// node: it is part of the replicated state machine.
	OutcomeRetention int
	// Checker, if set, is consulted for every command at apply.
	Checker kv.Checker
	// Observer, if set, is told about every applied batch, in log order.
	// After a snapshot restore it is called once with the snapshot's index
	// and an empty batch: the entries a snapshot covers are not applied,
	// nor reported, one by one.
	Observer kv.ApplyObserver
	// TLS, if set, authenticates peers with mutual TLS: each presents a
	// certificate from the cluster CA whose identity (pki.NodeID) is its
	// node ID, and every stream and message is bound to it (nil:
	// plaintext). Reloading it takes effect on the next connection.
	TLS *pki.Reloader
	// Metrics, if set, receives the node's measurements.
	Metrics Metrics
	// Logger receives structured logs (default slog.Default()).
	Logger *slog.Logger

	hooks *testHooks
}

// testHooks inject faults in tests.
type testHooks struct {
	// beforeWALSave is called before every WAL append; an error is treated
	// exactly like a failed write or fsync.
	beforeWALSave func() error
	// dropMessage is asked about every outgoing raft message; true drops
	// it as a lost packet would be (partitions between nodes).
	dropMessage func(m *raftpb.Message) bool
}

func (c *Config) withDefaults() (Config, error) {
	out := *c
	if out.NodeID == "" {
		return out, errors.New("raftstore: config: NodeID is empty; set a unique node ID")
	}
	if strings.Contains(out.NodeID, walMetaSep) {
		return out, fmt.Errorf("raftstore: config: NodeID %q contains a NUL byte; choose another ID", out.NodeID)
	}
	if out.DataDir == "" {
		return out, errors.New("raftstore: config: DataDir is empty; set a directory for the log and state")
	}
	if out.RaftAddr == "" && out.Listener == nil {
		return out, errors.New("raftstore: config: RaftAddr is empty; set host:port to listen on")
	}
	if out.TickInterval <= 0 {
		out.TickInterval = 50 * time.Millisecond
	}
	if out.HeartbeatTicks <= 0 {
		out.HeartbeatTicks = 2
	}
	if out.ElectionTicks <= 0 {
		out.ElectionTicks = 12
	}
	if out.ElectionTicks <= out.HeartbeatTicks {
		return out, fmt.Errorf("raftstore: config: ElectionTicks (%d) must exceed HeartbeatTicks (%d)", out.ElectionTicks, out.HeartbeatTicks)
	}
	if out.SnapshotCount == 0 {
		out.SnapshotCount = 10000
	}
	if out.SnapshotCatchUp == 0 {
		out.SnapshotCatchUp = 5000
	}
	if out.SnapshotCatchUp > out.SnapshotCount {
		out.SnapshotCatchUp = out.SnapshotCount
	}
	if out.MaxBatchBytes <= 0 {
		out.MaxBatchBytes = 1 << 20
	}
	if out.MaxEntryBytes <= 0 {
		out.MaxEntryBytes = 32 << 20
	}
	if out.MaxFrameBytes <= 0 {
		out.MaxFrameBytes = 64 << 20
	}
	if need := out.MaxEntryBytes + out.MaxBatchBytes + 64<<10; out.MaxFrameBytes < need {
		return out, fmt.Errorf("raftstore: config: MaxFrameBytes (%d) must be at least MaxEntryBytes + MaxBatchBytes + 64 KiB (%d): raise it or lower MaxEntryBytes", out.MaxFrameBytes, need)
	}
	if out.MaxSnapshotBytes <= 0 {
		out.MaxSnapshotBytes = defaultMaxSnapshotBytes
	}
	if out.MaxUncommittedBytes == 0 {
		out.MaxUncommittedBytes = 64 << 20
	}
	if out.SendQueue <= 0 {
		out.SendQueue = 4096
	}
	if out.OutcomeRetention <= 0 {
		out.OutcomeRetention = 100000
	}
	if out.Logger == nil {
		out.Logger = slog.Default()
	}
	seen := map[uint64]string{}
	for i, p := range out.Peers {
		if p.ID == "" || p.Addr == "" {
			return out, fmt.Errorf("raftstore: config: Peers[%d] needs both ID and Addr", i)
		}
		rid := RaftID(p.ID)
		if other, ok := seen[rid]; ok {
			return out, fmt.Errorf("raftstore: config: Peers[%d]: ID %q collides with %q (same raft ID); rename one", i, p.ID, other)
		}
		seen[rid] = p.ID
	}
	if len(out.Peers) > 0 {
		if _, ok := seen[RaftID(out.NodeID)]; !ok {
			return out, fmt.Errorf("raftstore: config: Peers does not include this node %q; list every initial member", out.NodeID)
		}
	}
	if out.Join && len(out.Peers) > 0 {
		return out, errors.New("raftstore: config: Join and Peers are exclusive; a joiner is added by the leader")
	}
	return out, nil
}

// defaultMaxSnapshotBytes is MaxSnapshotBytes unless set.
const defaultMaxSnapshotBytes = 4 << 30

// RaftID maps a node ID to raft's uint64 ID deterministically (FNV-1a 64,
// never zero), so every node computes the same mapping.
func RaftID(id string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(id))
	v := h.Sum64()
	if v == 0 {
		v = 1
	}
	return v
}
