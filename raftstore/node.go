package raftstore

import (
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/fileutil"
	"go.etcd.io/etcd/server/v3/etcdserver/api/snap"
	"go.etcd.io/etcd/server/v3/storage/wal"
	"go.etcd.io/etcd/server/v3/storage/wal/walpb"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/writ-dev/writ/kv"
)

// maxWALFiles is how many released WAL segments are kept on disk.
const maxWALFiles = 5

var (
	// ErrNotLeader: the operation must run on the leader.
	ErrNotLeader = errors.New("raftstore: not the leader")
	// ErrRemoved: this node was removed from the cluster.
	ErrRemoved = errors.New("raftstore: node was removed from the cluster")
)

// Node is one member of a replicated log. Create it with Start; it runs
// until Stop or a fatal storage error (see Err and Done).
type Node struct {
	cfg Config
	id  uint64
	// inc is the incarnation of this data directory: drawn when its WAL is
	// created and kept in the WAL's metadata (0 for a WAL written by an
	// older version). See Incarnation.
	inc uint64
	log *slog.Logger
	// rn is the raft state machine. Every call into it holds rnMu, never
	// while writing to disk, so proposals and messages stepped while the
	// appender waits for its fsync join its next round (one fsync for all
	// of them).
	rnMu      sync.Mutex
	rn        *raft.RawNode
	rnStopped bool          // guarded by rnMu: set once the node stops
	wakec     chan struct{} // wakes the Ready loop after a step
	storage   *logStorage
	wal       *wal.WAL
	snapper   *snap.Snapshotter
	snapDir   string
	st        *stateDB
	tr        *transport
	appendc   chan *raftpb.Message
	applyc    chan applyTask

	leader   atomic.Uint64
	isLeader atomic.Bool
	term     atomic.Uint64
	commit   atomic.Uint64
	applied  atomic.Uint64
	fsyncs   atomic.Uint64 // WAL appends that synced entries (for benchmarks)
	entries  atomic.Uint64 // entries appended to the WAL

	mu        sync.Mutex
	waiters   map[uint64]*proposal
	ccWaiters map[uint64]chan struct{}
	reads     map[uint64]chan uint64
	rb        readBatcher // linearizable reads sharing ReadIndex rounds (readindex.go)
	// readRounds counts ReadIndex rounds issued (for tests and metrics).
	readRounds atomic.Int64
	members    map[uint64]memberInfo
	appliedCh  chan struct{}

	// owned by the applier goroutine (and Start before it runs)
	confState *raftpb.ConfState
	skipIndex atomic.Uint64 // entry to apply as empty (SkipEntry), 0: none
	snapIndex atomic.Uint64 // written by the applier, read by tests
	// confSinceSnap: a conf change was applied after the last snapshot.
	confSinceSnap bool

	ccMu   sync.Mutex
	reqSeq atomic.Uint64

	stopc    chan struct{}
	done     chan struct{}
	stopOnce sync.Once
	fatalMu  sync.Mutex
	fatal    error
	wg       sync.WaitGroup
}

type applyTask struct {
	snap    *raftpb.Snapshot
	entries []*raftpb.Entry
	// resps go back to raft once the entries are applied.
	resps []*raftpb.Message
}

// Start opens (or creates) the node's data directory, replays the snapshot
// and log tail, starts the peer transport and the Ready loop.
func Start(c Config) (*Node, error) {
	cfg, err := c.withDefaults()
	if err != nil {
		return nil, err
	}
	n := &Node{
		cfg:       cfg,
		id:        RaftID(cfg.NodeID),
		log:       cfg.Logger.With("component", "raftstore", "node", cfg.NodeID),
		storage:   newLogStorage(),
		appendc:   make(chan *raftpb.Message, 256),
		applyc:    make(chan applyTask, 256),
		waiters:   map[uint64]*proposal{},
		ccWaiters: map[uint64]chan struct{}{},
		reads:     map[uint64]chan uint64{},
		appliedCh: make(chan struct{}),
		wakec:     make(chan struct{}, 1),
		stopc:     make(chan struct{}),
		done:      make(chan struct{}),
		confState: &raftpb.ConfState{},
	}
	n.reqSeq.Store(rand.Uint64() >> 1)
	if err := n.open(); err != nil {
		n.closeStorage()
		return nil, err
	}
	lis := cfg.Listener
	if lis == nil {
		lis, err = net.Listen("tcp", cfg.RaftAddr)
		if err != nil {
			n.closeStorage()
			return nil, fmt.Errorf("raftstore: listen on RaftAddr %q: %w", cfg.RaftAddr, err)
		}
	}
	addr := lis.Addr().String()
	rc := &raft.Config{
		ID:                        n.id,
		ElectionTick:              cfg.ElectionTicks,
		HeartbeatTick:             cfg.HeartbeatTicks,
		Storage:                   n.storage,
		MaxSizePerMsg:             uint64(cfg.MaxBatchBytes),
		MaxInflightMsgs:           256,
		MaxUncommittedEntriesSize: cfg.MaxUncommittedBytes,
		CheckQuorum:               true,
		PreVote:                   true,
		AsyncStorageWrites:        true,
		StepDownOnRemoval:         true,
		Logger:                    raftLogger{n.log},
	}
	fresh := n.wal == nil
	if fresh {
		if err := n.createWAL(); err != nil {
			_ = lis.Close()
			n.closeStorage()
			return nil, err
		}
	}
	peers := cfg.Peers
	if len(peers) == 0 {
		peers = []Peer{{ID: cfg.NodeID, Addr: addr}}
	}
	n.rn, err = raft.NewRawNode(rc)
	if err != nil {
		_ = lis.Close()
		n.closeStorage()
		return nil, fmt.Errorf("raftstore: start raft: %w", err)
	}
	if fresh && !cfg.Join {
		rpeers := make([]raft.Peer, len(peers))
		for i, p := range peers {
			a := p.Addr
			if p.ID == cfg.NodeID {
				a = addr
			}
			// Every static peer bootstraps the same entries, so only a
			// single-node bootstrap can name its incarnation.
			var inc uint64
			if len(peers) == 1 {
				inc = n.inc
			}
			rpeers[i] = raft.Peer{ID: RaftID(p.ID), Context: encodeMemberContextInc(p.ID, a, inc)}
		}
		if err := n.rn.Bootstrap(rpeers); err != nil {
			_ = lis.Close()
			n.closeStorage()
			return nil, fmt.Errorf("raftstore: bootstrap raft: %w", err)
		}
		if len(peers) == 1 {
			// A fresh single-node cluster need not wait an election timeout.
			_ = n.rn.Campaign()
		}
	}
	cid, err := n.openClusterID(fresh && !cfg.Join, peers, addr)
	if err != nil {
		_ = lis.Close()
		n.closeStorage()
		return nil, err
	}
	// The transport starts after raft: it steps incoming messages into it.
	n.tr = newTransport(n.id, lis, transportLimits{queue: cfg.SendQueue, batch: cfg.MaxBatchBytes, frame: cfg.MaxFrameBytes, snapshot: cfg.MaxSnapshotBytes}, n, n.log, peerSecurity{tls: cfg.TLS, cluster: cid})
	n.tr.metrics = cfg.Metrics
	if cfg.hooks != nil {
		n.tr.drop = cfg.hooks.dropMessage
	}
	for id, m := range n.members {
		if id != n.id {
			n.tr.setPeer(id, m.Addr)
		}
	}
	if fresh && !cfg.Join {
		for _, p := range peers {
			if p.ID != cfg.NodeID {
				n.tr.setPeer(RaftID(p.ID), p.Addr)
			}
		}
	}
	n.syncMembers(peers, fresh && !cfg.Join)
	// The observer learns where the loaded state stands before any entry
	// is reported to it: what came before was not observed one by one.
	if ro, ok := cfg.Observer.(kv.RestoreObserver); ok {
		ro.Restored(n.applied.Load())
	}
	n.wg.Add(3)
	go n.run()
	go n.appender()
	go n.applier()
	// Delete WAL segments that snapshots released, keeping the newest few.
	purgeErr := fileutil.PurgeFile(zap.NewNop(), filepath.Join(cfg.DataDir, "wal"), "wal", maxWALFiles, 30*time.Second, n.stopc)
	go func() {
		select {
		case err := <-purgeErr:
			if err != nil {
				n.log.Warn("raftstore: purging old WAL segments failed", "err", err)
			}
		case <-n.stopc:
		}
	}()
	n.log.Info("raftstore: started", "raft_id", n.id, "addr", n.tr.addr, "fresh", fresh, "join", cfg.Join, "applied", n.applied.Load(), "cluster_id", n.ClusterID(), "peer_tls", cfg.TLS != nil)
	return n, nil
}

// open loads the applied state, the newest snapshot and the WAL, if any.
func (n *Node) open() error {
	cfg := n.cfg
	walDir := filepath.Join(cfg.DataDir, "wal")
	n.snapDir = filepath.Join(cfg.DataDir, "snap")
	if err := os.MkdirAll(n.snapDir, 0o700); err != nil {
		return fmt.Errorf("raftstore: create %s: %w", n.snapDir, err)
	}
	lg := zap.NewNop()
	n.snapper = snap.New(lg, n.snapDir)
	st, err := openState(filepath.Join(cfg.DataDir, "state.db"), cfg.OutcomeRetention)
	if err != nil {
		return err
	}
	n.st = st
	st.onCommit = n.stateCommitHook()
	applied, members, err := st.load()
	if err != nil {
		return err
	}
	if !wal.Exist(walDir) {
		if applied > 0 {
			return fmt.Errorf("raftstore: %s has state applied to index %d but no WAL in %s; the data directory is incomplete", cfg.DataDir, applied, walDir)
		}
		n.members = members
		return nil
	}
	walSnaps, err := wal.ValidSnapshotEntries(lg, walDir)
	if err != nil {
		return fmt.Errorf("raftstore: read WAL snapshot entries: %w", err)
	}
	snapshot, err := n.snapper.LoadNewestAvailable(walSnaps)
	if err != nil && !errors.Is(err, snap.ErrNoSnapshot) {
		return fmt.Errorf("raftstore: load snapshot: %w", err)
	}
	ws := &walpb.Snapshot{Index: new(uint64(0)), Term: new(uint64(0))}
	if snapshot != nil {
		ws.Index = new(snapshot.GetMetadata().GetIndex())
		ws.Term = new(snapshot.GetMetadata().GetTerm())
	}
	w, err := wal.Open(lg, walDir, ws)
	if err != nil {
		return fmt.Errorf("raftstore: open WAL: %w", err)
	}
	n.wal = w
	meta, hs, ents, err := w.ReadAll()
	if err != nil {
		return fmt.Errorf("raftstore: replay WAL: %w", err)
	}
	owner, inc, err := decodeWALMetadata(meta)
	if err != nil {
		return fmt.Errorf("raftstore: WAL in %s: %w", walDir, err)
	}
	if owner != cfg.NodeID {
		return fmt.Errorf("raftstore: WAL in %s belongs to node %q, not %q; use that node's ID or another DataDir", walDir, owner, cfg.NodeID)
	}
	n.inc = inc
	if snapshot == nil && len(ents) == 0 && raft.IsEmptyHardState(hs) && applied == 0 {
		// Created but never written (stopped before the first Ready):
		// start over as a fresh node so that bootstrap runs again.
		if err := w.Close(); err != nil {
			return fmt.Errorf("raftstore: close empty WAL: %w", err)
		}
		n.wal = nil
		if err := os.RemoveAll(walDir); err != nil {
			return fmt.Errorf("raftstore: remove empty WAL: %w", err)
		}
		n.members = members
		return nil
	}
	if snapshot != nil {
		if err := n.storage.applySnapshot(snapshot); err != nil {
			return fmt.Errorf("raftstore: apply snapshot to log: %w", err)
		}
		if idx := snapshot.GetMetadata().GetIndex(); applied < idx {
			if len(snapshot.GetData()) == 0 {
				// A local snapshot is written only after the state it
				// names was synced: the state database was lost or
				// replaced by an older copy.
				return fmt.Errorf("raftstore: %s is at applied index %d, behind the snapshot at %d that relies on it (the state database was replaced or lost, and the log no longer reaches back): remove this node from the cluster, delete %s, and add it again as a new member", filepath.Join(cfg.DataDir, "state.db"), applied, idx, cfg.DataDir)
			}
			// The snapshot was received but not yet restored into the state.
			if applied, members, err = st.restore(snapshot.GetData()); err != nil {
				return fmt.Errorf("raftstore: restore snapshot: %w", err)
			}
		}
		n.confState = proto.Clone(snapshot.GetMetadata().GetConfState()).(*raftpb.ConfState)
		n.snapIndex.Store(snapshot.GetMetadata().GetIndex())
	}
	if hs != nil {
		if err := n.storage.SetHardState(hs); err != nil {
			return fmt.Errorf("raftstore: set hard state: %w", err)
		}
		n.term.Store(hs.GetTerm())
		n.commit.Store(hs.GetCommit())
	}
	if err := n.storage.Append(ents); err != nil {
		return fmt.Errorf("raftstore: load log entries: %w", err)
	}
	n.applied.Store(applied)
	n.members = members
	skip, err := st.loadSkip()
	if err != nil {
		return fmt.Errorf("raftstore: load state: %w", err)
	}
	if skip > applied {
		n.skipIndex.Store(skip)
		n.log.Warn("raftstore: offline recovery recorded a committed entry to skip", "index", skip)
	}
	return nil
}

func (n *Node) createWAL() error {
	walDir := filepath.Join(n.cfg.DataDir, "wal")
	n.inc = newIncarnation()
	w, err := wal.Create(zap.NewNop(), walDir, encodeWALMetadata(n.cfg.NodeID, n.inc))
	if err != nil {
		return fmt.Errorf("raftstore: create WAL in %s: %w", walDir, err)
	}
	n.wal = w
	return nil
}

func (n *Node) closeStorage() {
	if n.wal != nil {
		_ = n.wal.Close()
	}
	if n.st != nil {
		_ = n.st.close()
	}
}

// Lifecycle: identity, errors and shutdown.

// Addr is the address the peer transport listens on.
func (n *Node) Addr() string { return n.tr.addr }

// ID is the node's ID.
func (n *Node) ID() string { return n.cfg.NodeID }

// Done is closed once the node has stopped, by Stop or a fatal error.
func (n *Node) Done() <-chan struct{} { return n.done }

// Err returns the fatal error that stopped the node, if any.
func (n *Node) Err() error {
	n.fatalMu.Lock()
	defer n.fatalMu.Unlock()
	return n.fatal
}

func (n *Node) stopErr() error {
	if err := n.Err(); err != nil {
		return fmt.Errorf("raftstore: %w: %w", kv.ErrStopped, err)
	}
	return fmt.Errorf("raftstore: %w", kv.ErrStopped)
}

func (n *Node) running() error {
	select {
	case <-n.stopc:
		return n.stopErr()
	default:
		return nil
	}
}

// Stop shuts the node down and waits for it. It is safe to call twice.
func (n *Node) Stop() { n.shutdown() }

func (n *Node) failAsync(err error) {
	n.fatalMu.Lock()
	if n.fatal == nil {
		n.fatal = err
	}
	n.fatalMu.Unlock()
	var ae *ApplyError
	switch {
	case errors.Is(err, ErrRemoved):
		n.log.Warn("raftstore: stopping: removed from the cluster")
	case errors.As(err, &ae):
		n.log.Error("raftstore: fatal apply stop: a committed entry cannot be applied; the node stops and stops again at this entry on every restart",
			"index", ae.Index, "term", ae.Term, "type", ae.Type, "command_id", ae.CommandID, "commands", ae.Commands, "panic", ae.Panic, "err", err, "stack", ae.Stack)
	default:
		n.log.Error("raftstore: fatal error; node stops and recovers from disk on restart", "err", err)
	}
	go n.shutdown()
}

func (n *Node) shutdown() {
	n.stopOnce.Do(func() {
		close(n.stopc)
		n.rnMu.Lock()
		n.rnStopped = true
		n.rnMu.Unlock()
		n.wg.Wait()
		n.tr.close()
		if err := n.wal.Close(); err != nil {
			n.log.Warn("raftstore: close WAL", "err", err)
		}
		if err := n.st.close(); err != nil {
			n.log.Warn("raftstore: close state", "err", err)
		}
		err := n.stopErr()
		n.mu.Lock()
		for id, p := range n.waiters {
			delete(n.waiters, id)
			p.finish(nil, err)
		}
		n.mu.Unlock()
		close(n.done)
	})
	<-n.done
}
