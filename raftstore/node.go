package raftstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
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

// run is the Ready loop; see the package doc for the numbered duties.
func (n *Node) run() {
	defer n.wg.Done()
	ticker := time.NewTicker(n.cfg.TickInterval)
	defer ticker.Stop()
	for {
		// Tick even while Readys keep coming.
		select {
		case <-ticker.C:
			n.rnMu.Lock()
			n.rn.Tick()
			n.rnMu.Unlock()
		default:
		}
		n.rnMu.Lock()
		var rd raft.Ready
		has := n.rn.HasReady()
		if has {
			rd = n.rn.Ready()
		}
		n.rnMu.Unlock()
		if has {
			if err := n.handleReady(rd); err != nil {
				if !errors.Is(err, errStopping) {
					n.failAsync(err)
				}
				return
			}
			continue
		}
		select {
		case <-ticker.C:
			n.rnMu.Lock()
			n.rn.Tick()
			n.rnMu.Unlock()
		case <-n.wakec:
		case <-n.stopc:
			return
		}
	}
}

// withRaft calls f with the raft state machine, then wakes the Ready loop.
// It returns raft.ErrStopped once the node is stopping.
func (n *Node) withRaft(f func(rn *raft.RawNode) error) error {
	n.rnMu.Lock()
	if n.rnStopped {
		n.rnMu.Unlock()
		return raft.ErrStopped
	}
	err := f(n.rn)
	n.rnMu.Unlock()
	select {
	case n.wakec <- struct{}{}:
	default:
	}
	return err
}

var errStopping = errors.New("raftstore: stopping")

func (n *Node) handleReady(rd raft.Ready) error {
	if rd.SoftState != nil {
		n.mleader(n.leader.Swap(rd.SoftState.Lead), rd.SoftState.Lead)
		n.isLeader.Store(rd.SoftState.RaftState == raft.StateLeader)
	}
	if rd.HardState != nil {
		n.term.Store(rd.HardState.GetTerm())
		n.commit.Store(rd.HardState.GetCommit())
	}
	// 1. Route the messages: log appends to the appender, committed
	// entries to the applier, the rest to the network at once. What must
	// wait for this node's disk (append and vote responses) travels inside
	// the append message and is sent by the appender after the fsync.
	var peers []*raftpb.Message
	for _, m := range rd.Messages {
		switch m.GetTo() {
		case raft.LocalAppendThread:
			select {
			case n.appendc <- m:
			case <-n.stopc:
				return errStopping
			}
		case raft.LocalApplyThread:
			if err := n.handToApplier(applyTask{entries: m.GetEntries(), resps: m.GetResponses()}); err != nil {
				return err
			}
		default:
			peers = append(peers, m)
		}
	}
	n.tr.send(coalesce(peers, n.cfg.MaxBatchBytes))
	// 2. Answer linearizable reads.
	if len(rd.ReadStates) > 0 {
		n.mu.Lock()
		for _, rs := range rd.ReadStates {
			if len(rs.RequestCtx) == 8 {
				if ch, ok := n.reads[binary.BigEndian.Uint64(rs.RequestCtx)]; ok {
					select {
					case ch <- rs.Index:
					default:
					}
				}
			}
		}
		n.mu.Unlock()
	}
	return nil
}

// appender persists log appends in order: each round takes every append
// message queued by then and writes them with one WAL fsync, makes them
// visible to raft's log storage, hands received snapshots to the applier
// and only then delivers the responses the messages carry (to this node's
// raft and to peers). An error stops the node with nothing acknowledged.
func (n *Node) appender() {
	defer n.wg.Done()
	var batch []*raftpb.Message
	for {
		batch = batch[:0]
		select {
		case m := <-n.appendc:
			batch = append(batch, m)
		case <-n.stopc:
			return
		}
	more:
		for len(batch) < maxAppendBatch {
			select {
			case m := <-n.appendc:
				batch = append(batch, m)
			default:
				break more
			}
		}
		if err := n.persist(batch); err != nil {
			if !errors.Is(err, errStopping) {
				n.failAsync(err)
			}
			return
		}
	}
}

// maxAppendBatch bounds how many append messages share one WAL fsync.
const maxAppendBatch = 256

func (n *Node) persist(batch []*raftpb.Message) error {
	// 1. WAL: entries and hard state, a received snapshot's file and
	// record in its place in the order, one fsync for the batch.
	var ents []*raftpb.Entry
	var hs *raftpb.HardState
	save := func() error {
		if len(ents) == 0 && hs == nil {
			return nil
		}
		var err error
		if h := n.cfg.hooks; h != nil && h.beforeWALSave != nil {
			err = h.beforeWALSave()
		}
		if err == nil {
			err = n.wal.Save(hs, ents)
		}
		if err != nil {
			return fmt.Errorf("raftstore: WAL write/fsync failed; stopping without acknowledging: %w", err)
		}
		if len(ents) > 0 {
			n.fsyncs.Add(1)
			n.entries.Add(uint64(len(ents)))
		}
		ents, hs = ents[:0], nil
		return nil
	}
	for _, m := range batch {
		if s := m.GetSnapshot(); !raft.IsEmptySnap(s) {
			if err := save(); err != nil {
				return err
			}
			if err := n.saveSnapshot(s); err != nil {
				return err
			}
		}
		ents = append(ents, m.GetEntries()...)
		if m.Term != nil {
			hs = &raftpb.HardState{Term: m.Term, Vote: m.Vote, Commit: m.Commit}
		}
	}
	if err := save(); err != nil {
		return err
	}
	// 2. Raft's log storage, in order; a received snapshot also goes to
	// the applier, behind the committed entries handed to it before.
	for _, m := range batch {
		if s := m.GetSnapshot(); !raft.IsEmptySnap(s) {
			if err := n.storage.applySnapshot(s); err != nil {
				return fmt.Errorf("raftstore: apply snapshot to log storage: %w", err)
			}
			if err := n.handToApplier(applyTask{snap: s}); err != nil {
				return err
			}
		}
		if err := n.storage.Append(m.GetEntries()); err != nil {
			return fmt.Errorf("raftstore: append to log storage: %w", err)
		}
	}
	// 3. The responses, now that what they promise is durable.
	var local, remote []*raftpb.Message
	for _, m := range batch {
		for _, r := range m.GetResponses() {
			if r.GetTo() == n.id {
				local = append(local, r)
			} else {
				remote = append(remote, r)
			}
		}
	}
	n.tr.send(coalesce(remote, n.cfg.MaxBatchBytes))
	return n.stepLocal(local)
}

// stepLocal steps messages from this node's own storage goroutines.
func (n *Node) stepLocal(msgs []*raftpb.Message) error {
	if len(msgs) == 0 {
		return nil
	}
	err := n.withRaft(func(rn *raft.RawNode) error {
		for _, m := range msgs {
			// A response from a member this node no longer knows (it was
			// just removed) is refused; nothing else can fail here.
			_ = rn.Step(m)
		}
		return nil
	})
	if errors.Is(err, raft.ErrStopped) {
		return errStopping
	}
	return err
}

func (n *Node) handToApplier(t applyTask) error {
	select {
	case n.applyc <- t:
		return nil
	case <-n.stopc:
		return errStopping
	}
}

func (n *Node) saveSnapshot(s *raftpb.Snapshot) error {
	md := s.GetMetadata()
	if err := n.snapper.SaveSnap(s); err != nil {
		return fmt.Errorf("raftstore: save snapshot %d: %w", md.GetIndex(), err)
	}
	ws := &walpb.Snapshot{Index: new(md.GetIndex()), Term: new(md.GetTerm()), ConfState: md.GetConfState()}
	if ws.ConfState == nil {
		ws.ConfState = &raftpb.ConfState{}
	}
	if err := n.wal.SaveSnapshot(ws); err != nil {
		return fmt.Errorf("raftstore: WAL snapshot record %d: %w", md.GetIndex(), err)
	}
	return nil
}

// applier applies committed entries to the state, one bbolt transaction
// per batch of Ready results, then releases waiters and observers.
func (n *Node) applier() {
	defer n.wg.Done()
	commit := time.NewTimer(time.Hour)
	commit.Stop()
	defer commit.Stop()
	for {
		var tasks []applyTask
		select {
		case t := <-n.applyc:
			tasks = append(tasks, t)
		case <-commit.C:
		case <-n.stopc:
			return
		}
	more:
		for len(tasks) < 64 {
			select {
			case t := <-n.applyc:
				tasks = append(tasks, t)
			default:
				break more
			}
		}
		var ents []*raftpb.Entry
		var resps []*raftpb.Message
		for _, t := range tasks {
			if t.snap != nil {
				if err := n.applyEntries(ents); err != nil {
					n.failAsync(err)
					return
				}
				ents = nil
				if err := n.restoreSnapshot(t.snap); err != nil {
					n.failAsync(err)
					return
				}
			}
			ents = append(ents, t.entries...)
			resps = append(resps, t.resps...)
		}
		if err := n.applyEntries(ents); err != nil {
			n.failAsync(err)
			return
		}
		// Tell raft what is applied (it gates conf changes on it).
		if err := n.stepLocal(resps); err != nil {
			if !errors.Is(err, errStopping) {
				n.failAsync(err)
			}
			return
		}
		if err := n.maybeSnapshot(); err != nil {
			n.failAsync(err)
			return
		}
		// Commit the state transaction when due; otherwise come back when
		// it will be, should no entries arrive before then.
		wait, err := n.st.maybeCommit()
		if err != nil {
			n.failAsync(err)
			return
		}
		if wait > 0 {
			commit.Reset(wait)
		}
	}
}

// applyMemberChange updates the member table and the transport; it reports
// whether this node was removed. The removal of an earlier incarnation of
// this node (see incarnation.go) is applied like any change to the
// configuration, and does not stop it.
func (n *Node) applyMemberChange(cc *raftpb.ConfChange, idx uint64) bool {
	id := cc.GetNodeId()
	sid, addr, inc, cerr := decodeMemberContextInc(cc.GetContext())
	n.mu.Lock()
	defer n.mu.Unlock()
	switch cc.GetType() {
	case raftpb.ConfChangeAddNode, raftpb.ConfChangeAddLearnerNode, raftpb.ConfChangeUpdateNode:
		m := n.members[id]
		if cerr == nil {
			m.ID, m.Addr = sid, addr
			if inc != 0 {
				m.Inc = inc
			}
		}
		switch cc.GetType() {
		case raftpb.ConfChangeAddNode:
			m.Learner = false
		case raftpb.ConfChangeAddLearnerNode:
			m.Learner = true
		}
		n.members[id] = m
		if id != n.id {
			n.tr.setPeer(id, m.Addr)
		}
	case raftpb.ConfChangeRemoveNode:
		delete(n.members, id)
		if id == n.id {
			if cerr != nil || n.removesThisNode(inc) {
				return true
			}
			n.log.Info("raftstore: applied the removal of an earlier incarnation of this node; it is not this node's removal",
				"index", idx, "removed_incarnation", fmt.Sprintf("%016x", inc), "incarnation", fmt.Sprintf("%016x", n.inc))
			break
		}
		n.tr.removePeer(id)
	}
	n.syncMembersLocked()
	return false
}

func (n *Node) restoreSnapshot(s *raftpb.Snapshot) error {
	md := s.GetMetadata()
	if md.GetIndex() <= n.applied.Load() {
		return nil
	}
	applied, members, err := n.st.restore(s.GetData())
	if err != nil {
		return fmt.Errorf("raftstore: restore snapshot %d: %w", md.GetIndex(), err)
	}
	if applied != md.GetIndex() {
		return fmt.Errorf("raftstore: snapshot %d carries state applied to %d", md.GetIndex(), applied)
	}
	n.confState = proto.Clone(md.GetConfState()).(*raftpb.ConfState)
	n.snapIndex.Store(md.GetIndex())
	n.mu.Lock()
	old := n.members
	n.members = members
	n.syncMembersLocked()
	n.mu.Unlock()
	for id := range old {
		if _, ok := members[id]; !ok && id != n.id {
			n.tr.removePeer(id)
		}
	}
	for id, m := range members {
		if id != n.id {
			n.tr.setPeer(id, m.Addr)
		}
	}
	n.setApplied(md.GetIndex())
	n.log.Info("raftstore: restored state from snapshot", "index", md.GetIndex())
	// The entries the snapshot covers are not applied one by one here:
	// tell the observer where the state now is, and settle the waiters
	// whose outcome the snapshot recorded.
	if ro, ok := n.cfg.Observer.(kv.RestoreObserver); ok {
		ro.Restored(md.GetIndex())
	} else if obs := n.cfg.Observer; obs != nil {
		obs.Applied(md.GetIndex(), nil, nil)
	}
	return n.settleFromOutcomes()
}

// settleFromOutcomes finishes every waiting proposal whose commands all
// have a StatusApplied outcome in the state, with those outcomes. Only an
// application settles a command ID for good: a recorded conflict or
// rejection may belong to an earlier attempt with the same ID, so such a
// waiter keeps waiting for its own entry (or its deadline).
func (n *Node) settleFromOutcomes() error {
	n.mu.Lock()
	waiting := make([]*proposal, 0, len(n.waiters))
	for _, p := range n.waiters {
		waiting = append(waiting, p)
	}
	n.mu.Unlock()
	if len(waiting) == 0 {
		return nil
	}
	type settled struct {
		p       *proposal
		results []kv.Result
	}
	var done []settled
	err := n.st.db.View(func(tx *bolt.Tx) error {
		outb := tx.Bucket(bucketOutcomes)
	next:
		for _, p := range waiting {
			results := make([]kv.Result, len(p.ids))
			for i, id := range p.ids {
				if id == "" {
					continue next
				}
				r, ok := decodeOutcome(outb.Get([]byte(id)))
				// An applied outcome may be this proposal's; a fence is
				// final for the ID, whoever proposed it.
				if !ok || (r.Status != kv.StatusApplied && r.Status != kv.StatusFenced) {
					continue next
				}
				results[i] = r
			}
			done = append(done, settled{p, results})
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("raftstore: read outcomes after snapshot restore: %w", err)
	}
	n.mu.Lock()
	for _, d := range done {
		if n.waiters[d.p.req] == d.p {
			delete(n.waiters, d.p.req)
			d.p.finish(d.results, nil)
		}
	}
	n.mu.Unlock()
	if len(done) > 0 {
		n.log.Info("raftstore: settled waiting proposals from the snapshot's outcomes", "count", len(done))
	}
	return nil
}

// maybeSnapshot takes a snapshot every SnapshotCount applied entries, and
// right after a configuration change once the log has been compacted (a
// member added after the last snapshot must receive a snapshot whose
// configuration includes it, or it refuses it), then compacts the
// in-memory log and the WAL locks behind it.
func (n *Node) maybeSnapshot() error {
	due := n.applied.Load()-n.snapIndex.Load() >= n.cfg.SnapshotCount
	if first, err := n.storage.FirstIndex(); err == nil && first > 1 && n.confSinceSnap {
		due = true
	}
	if !due {
		return nil
	}
	if last, err := n.storage.LastIndex(); err != nil || last < n.applied.Load() {
		// The log does not hold the applied index yet (state.db from an
		// older version may be ahead of its own WAL): try again after the
		// next apply, which follows every append of committed entries.
		return nil
	}
	n.confSinceSnap = false
	defer n.msnapshot(time.Now())
	// The snapshot is where older WAL entries stop being the only durable
	// copy of the state: make the state durable first. The state database
	// itself is the snapshot's data; the snapshot records only where it
	// stands (a follower that needs it gets it built then: fillSnapshot).
	if err := n.st.sync(); err != nil {
		return fmt.Errorf("raftstore: sync state before snapshot: %w", err)
	}
	idx := n.applied.Load()
	s, err := n.storage.CreateSnapshot(idx, n.confState, nil)
	if errors.Is(err, raft.ErrSnapOutOfDate) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("raftstore: create snapshot %d: %w", idx, err)
	}
	if err := n.saveSnapshot(s); err != nil {
		return err
	}
	n.snapIndex.Store(idx)
	if idx > n.cfg.SnapshotCatchUp {
		if err := n.storage.Compact(idx - n.cfg.SnapshotCatchUp); err != nil && !errors.Is(err, raft.ErrCompacted) {
			return fmt.Errorf("raftstore: compact log to %d: %w", idx-n.cfg.SnapshotCatchUp, err)
		}
	}
	if err := n.wal.ReleaseLockTo(idx); err != nil {
		return fmt.Errorf("raftstore: release WAL before %d: %w", idx, err)
	}
	n.purgeSnapFiles(2)
	n.log.Debug("raftstore: snapshot", "index", idx)
	return nil
}

// purgeSnapFiles keeps the newest keep snapshot files.
func (n *Node) purgeSnapFiles(keep int) {
	names, err := filepath.Glob(filepath.Join(n.snapDir, "*.snap"))
	if err != nil || len(names) <= keep {
		return
	}
	sort.Strings(names) // term-index in fixed-width hex sorts by age
	for _, name := range names[:len(names)-keep] {
		_ = os.Remove(name)
	}
}

func (n *Node) setApplied(idx uint64) {
	n.applied.Store(idx)
	n.mu.Lock()
	close(n.appliedCh)
	n.appliedCh = make(chan struct{})
	n.mu.Unlock()
}

func (n *Node) waitApplied(ctx context.Context, idx uint64) error {
	for {
		n.mu.Lock()
		ch := n.appliedCh
		n.mu.Unlock()
		if n.applied.Load() >= idx {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("raftstore: waiting for apply of index %d: %w", idx, ctx.Err())
		case <-n.done:
			return n.stopErr()
		}
	}
}

// ---- transport callbacks ----

// check validates a message received from a peer (checkIncoming).
func (n *Node) check(m *raftpb.Message) error {
	last, err := n.storage.LastIndex()
	if err != nil {
		return fmt.Errorf("%w: %w", errMalformed, err)
	}
	return n.checkIncoming(m, last)
}

// step steps a message received from a peer. Messages raft refuses (a
// local message type, a response from a peer it does not know) are
// dropped; only a stopping node returns an error.
// The transport checks every message first (check); one that still makes
// raft panic is refused with an error wrapping errMalformed: the transport
// drops the stream and logs where it came from. raft's panics on a
// received message are assertions checked before it changes any state.
func (n *Node) step(_ context.Context, m *raftpb.Message) error {
	err := n.withRaft(func(rn *raft.RawNode) (err error) {
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("%w: raft refused %s from %x: %v", errMalformed, m.GetType(), m.GetFrom(), p)
			}
		}()
		return rn.Step(m)
	})
	if errors.Is(err, raft.ErrStopped) || errors.Is(err, errMalformed) {
		return err
	}
	return nil
}

// fillSnapshot gives an outgoing MsgSnap its data: the applied state as it
// stands now, named by its own index, term and configuration. Raft picked
// the newest local snapshot, which carries no data; the current state is
// at or past it (local snapshots are taken of synced state), so the
// follower ends up further ahead, and raft accepts that (etcd's server
// sends its backend the same way). The message gets a new Snapshot: the
// one raft handed over belongs to the log storage.
func (n *Node) fillSnapshot(m *raftpb.Message) error {
	s, err := n.st.snapshot()
	if err != nil {
		return fmt.Errorf("raftstore: build snapshot for node %x: %w", m.GetTo(), err)
	}
	if s.GetMetadata().GetIndex() < m.GetSnapshot().GetMetadata().GetIndex() {
		return fmt.Errorf("raftstore: build snapshot for node %x: state at %d is behind snapshot %d", m.GetTo(), s.GetMetadata().GetIndex(), m.GetSnapshot().GetMetadata().GetIndex())
	}
	m.Snapshot = s
	return nil
}

func (n *Node) reportUnreachable(id uint64) {
	_ = n.withRaft(func(rn *raft.RawNode) error { rn.ReportUnreachable(id); return nil })
}

func (n *Node) reportSnapshot(id uint64, s raft.SnapshotStatus) {
	_ = n.withRaft(func(rn *raft.RawNode) error { rn.ReportSnapshot(id, s); return nil })
}

// applyConfChange tells raft that a configuration change was applied.
func (n *Node) applyConfChange(cc raftpb.ConfChangeI) *raftpb.ConfState {
	var cs *raftpb.ConfState
	_ = n.withRaft(func(rn *raft.RawNode) error { cs = rn.ApplyConfChange(cc); return nil })
	return cs
}

// ---- lifecycle ----

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

// ---- raft logger ----

type raftLogger struct{ l *slog.Logger }

func (r raftLogger) Debug(v ...any) { r.l.Debug(fmt.Sprint(v...)) }
func (r raftLogger) Debugf(f string, v ...any) {
	if r.l.Enabled(context.Background(), slog.LevelDebug) {
		r.l.Debug(fmt.Sprintf(f, v...))
	}
}
func (r raftLogger) Info(v ...any) { r.l.Debug(fmt.Sprint(v...)) }
func (r raftLogger) Infof(f string, v ...any) {
	if r.l.Enabled(context.Background(), slog.LevelDebug) {
		r.l.Debug(fmt.Sprintf(f, v...))
	}
}
func (r raftLogger) Warning(v ...any)            { r.l.Warn(fmt.Sprint(v...)) }
func (r raftLogger) Warningf(f string, v ...any) { r.l.Warn(fmt.Sprintf(f, v...)) }
func (r raftLogger) Error(v ...any)              { r.l.Error(fmt.Sprint(v...)) }
func (r raftLogger) Errorf(f string, v ...any)   { r.l.Error(fmt.Sprintf(f, v...)) }
func (r raftLogger) Fatal(v ...any)              { r.Panic(v...) }
func (r raftLogger) Fatalf(f string, v ...any)   { r.Panicf(f, v...) }
func (r raftLogger) Panic(v ...any) {
	s := fmt.Sprint(v...)
	r.l.Error(s)
	panic(s)
}
func (r raftLogger) Panicf(f string, v ...any) {
	s := fmt.Sprintf(f, v...)
	r.l.Error(s)
	panic(s)
}
