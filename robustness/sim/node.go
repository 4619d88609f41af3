package sim

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/writ-dev/writ/kv"
	"github.com/writ-dev/writ/pipeline"
)

// node is one simulated member: an etcd raft RawNode configured as
// raftstore configures it (PreVote, CheckQuorum, AsyncStorageWrites,
// StepDownOnRemoval) and driven with raftstore's duties in raftstore's
// order, over a simulated disk and network, with the real pipeline (Manual
// mode) on top. It implements pipeline.Log.
type node struct {
	w    *World
	idx  int
	id   uint64
	name string
	up   bool
	life int // incremented by every crash: events of an older life are void

	disk  disk
	rn    *raft.RawNode
	ms    *raft.MemoryStorage
	st    *state
	cs    *raftpb.ConfState
	pl    *pipeline.Pipeline
	check kv.Checker

	appendq   []*raftpb.Message
	appending bool
	applyq    []applyTask
	applying  bool
	snapIndex uint64

	lead     uint64
	isLeader bool
	reqSeq   uint64
}

type applyTask struct {
	snap    *raftpb.Snapshot
	entries []*raftpb.Entry
	resps   []*raftpb.Message
}

var _ pipeline.Log = (*node)(nil)

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

// start opens the node from its durable disk (a fresh node bootstraps the
// static configuration) with a new pipeline.
func (n *node) start() error {
	ms, err := n.disk.load()
	if err != nil {
		return fmt.Errorf("sim: %s: load disk: %w", n.name, err)
	}
	n.ms, n.st, n.cs, n.snapIndex = ms, newState(), &raftpb.ConfState{}, 0
	if s := n.disk.snap(); s != nil {
		if n.st, err = decodeState(s.GetData()); err != nil {
			return err
		}
		n.cs = proto.Clone(s.GetMetadata().GetConfState()).(*raftpb.ConfState)
		n.snapIndex = s.GetMetadata().GetIndex()
	}
	n.appendq, n.applyq, n.appending, n.applying = nil, nil, false, false
	n.lead, n.isLeader = 0, false
	c := n.w.cfg
	rn, err := raft.NewRawNode(&raft.Config{
		ID: n.id, ElectionTick: c.ElectionTicks, HeartbeatTick: c.HeartbeatTicks, Storage: ms,
		MaxSizePerMsg: 1 << 20, MaxInflightMsgs: 256, MaxUncommittedEntriesSize: 64 << 20,
		CheckQuorum: true, PreVote: true, AsyncStorageWrites: true, StepDownOnRemoval: true,
		Logger: raftLogger{},
	})
	if err != nil {
		return fmt.Errorf("sim: %s: start raft: %w", n.name, err)
	}
	n.rn = rn
	if n.disk.hs == nil && len(n.disk.snaps) == 0 && len(n.disk.ents) == 0 {
		peers := make([]raft.Peer, len(n.w.nodes))
		for i, o := range n.w.nodes {
			peers[i] = raft.Peer{ID: o.id}
		}
		if err := rn.Bootstrap(peers); err != nil {
			return fmt.Errorf("sim: %s: bootstrap: %w", n.name, err)
		}
	}
	pl, err := pipeline.New(pipeline.Config{
		NodeID: n.name, Catalog: n.w.cat, Log: n, Evaluator: putHandler{}, Clock: n.w.clock,
		Outbox: n.w.outboxes[n.idx], CommitTimeout: c.CommitTimeout, Manual: true,
		RetryRand: n.w.rng.Float64, Logger: discard,
	})
	if err != nil {
		return fmt.Errorf("sim: %s: pipeline: %w", n.name, err)
	}
	n.pl, n.check = pl, pl.Checker()
	pl.Restored(n.st.Applied)
	if err := pl.Start(context.Background()); err != nil {
		return fmt.Errorf("sim: %s: start pipeline: %w", n.name, err)
	}
	n.up = true
	return nil
}

// crash stops the node at once: the unsynced tail of its disk is lost
// (all of it, or a prefix drawn from the seed), everything in memory goes.
func (n *node) crash() int {
	keep := 0
	if k := len(n.disk.pending); k > 0 {
		keep = n.w.rng.Intn(k + 1)
	}
	lost := n.disk.crash(keep)
	n.up = false
	n.life++
	_ = n.pl.Stop()
	n.rn, n.ms, n.st, n.pl = nil, nil, nil, nil
	return lost
}

// ready handles one Ready, if raft has one (raftstore's handleReady).
func (n *node) ready() bool {
	if !n.up || !n.rn.HasReady() {
		return false
	}
	rd := n.rn.Ready()
	if rd.SoftState != nil {
		n.lead = rd.SoftState.Lead
		n.isLeader = rd.SoftState.RaftState == raft.StateLeader
	}
	if n.isLeader {
		n.w.sawLeader(n, n.rn.BasicStatus().GetTerm())
	}
	for _, m := range rd.Messages {
		switch m.GetTo() {
		case raft.LocalAppendThread:
			n.appendq = append(n.appendq, m)
		case raft.LocalApplyThread:
			n.applyq = append(n.applyq, applyTask{entries: m.GetEntries(), resps: m.GetResponses()})
		default:
			n.w.net.send(n, m)
		}
	}
	n.kickAppender()
	n.kickApplier()
	return true
}

// kickAppender starts a round of the appender if it is idle: every queued
// append message is written, one fsync follows after the disk's latency,
// and only then do the storage append and the responses happen (duties
// 5–8). Under canary_raftackbeforefsync the responses go out at once.
func (n *node) kickAppender() {
	if n.appending || len(n.appendq) == 0 || !n.up {
		return
	}
	batch := n.appendq
	n.appendq = nil
	n.appending = true
	for _, m := range batch {
		w := diskWrite{}
		if s := m.GetSnapshot(); !raft.IsEmptySnap(s) {
			w.snap = proto.Clone(s).(*raftpb.Snapshot)
		}
		for _, e := range m.GetEntries() {
			w.ents = append(w.ents, proto.Clone(e).(*raftpb.Entry))
		}
		if m.Term != nil {
			w.hs = &raftpb.HardState{Term: m.Term, Vote: m.Vote, Commit: m.Commit}
		}
		n.disk.write(w)
	}
	n.w.stats.Writes += len(batch)
	early := canaryAckBeforeFsync
	if early {
		n.persisted(batch)
	}
	life := n.life
	n.w.after(n.w.fsyncDelay(), func() {
		if n.life != life {
			return
		}
		n.disk.sync()
		n.w.stats.Fsyncs++
		n.w.traceEvent("fsync", uint64(n.idx), n.disk.lastIndex())
		if !early {
			n.persisted(batch)
		}
		n.appending = false
		n.kickAppender()
	})
}

// persisted does what follows the fsync: log storage, received snapshots
// to the applier, then the responses (to raft and to peers).
func (n *node) persisted(batch []*raftpb.Message) {
	for _, m := range batch {
		if s := m.GetSnapshot(); !raft.IsEmptySnap(s) {
			if err := n.ms.ApplySnapshot(s); err != nil {
				n.w.fail("%s: apply snapshot to log storage: %v", n.name, err)
			}
			n.applyq = append(n.applyq, applyTask{snap: s})
		}
		if err := n.ms.Append(m.GetEntries()); err != nil {
			n.w.fail("%s: append to log storage: %v", n.name, err)
		}
	}
	for _, m := range batch {
		for _, r := range m.GetResponses() {
			if r.GetTo() == n.id {
				_ = n.rn.Step(r)
			} else {
				n.w.net.send(n, r)
			}
		}
	}
	n.kickApplier()
}

// kickApplier applies what was handed over after a short delay (the
// applier is raftstore's third goroutine).
func (n *node) kickApplier() {
	if n.applying || len(n.applyq) == 0 || !n.up {
		return
	}
	n.applying = true
	life := n.life
	n.w.after(n.w.applyDelay(), func() {
		if n.life != life {
			return
		}
		tasks := n.applyq
		n.applyq = nil
		for _, t := range tasks {
			if t.snap != nil {
				n.restore(t.snap)
			}
			for _, e := range t.entries {
				n.applyEntry(e)
			}
			for _, r := range t.resps {
				_ = n.rn.Step(r)
			}
		}
		n.maybeSnapshot()
		n.applying = false
		n.kickApplier()
	})
}

func (n *node) restore(s *raftpb.Snapshot) {
	idx := s.GetMetadata().GetIndex()
	if idx <= n.st.Applied {
		return
	}
	st, err := decodeState(s.GetData())
	if err != nil {
		n.w.fail("%s: %v", n.name, err)
		return
	}
	n.st = st
	n.cs = proto.Clone(s.GetMetadata().GetConfState()).(*raftpb.ConfState)
	n.snapIndex = idx
	n.w.stats.SnapshotsInstalled++
	n.w.traceEvent("restore", uint64(n.idx), idx)
	n.pl.Restored(idx)
}

func (n *node) applyEntry(e *raftpb.Entry) {
	idx := e.GetIndex()
	if idx <= n.st.Applied {
		return
	}
	var cmds []kv.Command
	var results []kv.Result
	switch e.GetType() {
	case raftpb.EntryConfChange:
		var cc raftpb.ConfChange
		if err := proto.Unmarshal(e.GetData(), &cc); err != nil {
			n.w.fail("%s: conf change at %d: %v", n.name, idx, err)
			return
		}
		n.cs = n.rn.ApplyConfChange(&cc)
	case raftpb.EntryConfChangeV2:
		var cc raftpb.ConfChangeV2
		if err := proto.Unmarshal(e.GetData(), &cc); err != nil {
			n.w.fail("%s: conf change at %d: %v", n.name, idx, err)
			return
		}
		n.cs = n.rn.ApplyConfChange(&cc)
	default:
		if len(e.GetData()) > 0 {
			var err error
			if cmds, err = decodeEntry(e.GetData()); err != nil {
				n.w.fail("%s: entry %d: %v", n.name, idx, err)
				return
			}
			results = n.st.apply(idx, cmds, n.check)
		}
	}
	n.st.Applied = idx
	n.w.sawApplied(n, e, results)
	if len(cmds) > 0 {
		n.pl.Applied(idx, cmds, results)
	}
}

// maybeSnapshot takes a local snapshot every SnapshotCount applied
// entries and compacts the log behind it.
func (n *node) maybeSnapshot() {
	c := n.w.cfg
	applied := n.st.Applied
	if applied-n.snapIndex < c.SnapshotCount {
		return
	}
	s, err := n.ms.CreateSnapshot(applied, n.cs, n.st.encode())
	if errors.Is(err, raft.ErrSnapOutOfDate) {
		return
	}
	if err != nil {
		n.w.fail("%s: create snapshot %d: %v", n.name, applied, err)
		return
	}
	n.disk.saveLocalSnapshot(proto.Clone(s).(*raftpb.Snapshot))
	n.snapIndex = applied
	n.w.stats.Snapshots++
	if applied > c.SnapshotCatchUp {
		if err := n.ms.Compact(applied - c.SnapshotCatchUp); err != nil && !errors.Is(err, raft.ErrCompacted) {
			n.w.fail("%s: compact: %v", n.name, err)
		}
	}
}

// ---- entries: origin and request number around the kv batch codec ----

func (n *node) encodeEntry(batch []kv.Command) []byte {
	n.reqSeq++
	b := binary.BigEndian.AppendUint32(nil, uint32(n.idx))
	b = binary.BigEndian.AppendUint64(b, n.reqSeq)
	return kv.AppendBatch(b, batch)
}

func decodeEntry(b []byte) ([]kv.Command, error) {
	if len(b) < 12 {
		return nil, fmt.Errorf("sim: entry of %d bytes has no envelope", len(b))
	}
	return kv.DecodeBatch(b[12:])
}

// ---- pipeline.Log ----

type proposal struct{}

func (proposal) Wait(context.Context) ([]kv.Result, error) {
	return nil, errors.New("sim: Proposal.Wait is not used: the pipeline runs in Manual mode and learns outcomes from Applied")
}

func (n *node) Propose(_ context.Context, batch []kv.Command) (kv.Proposal, error) {
	if !n.up {
		return nil, fmt.Errorf("sim: %s: %w", n.name, kv.ErrStopped)
	}
	if n.lead == raft.None {
		return nil, fmt.Errorf("sim: %s: %w", n.name, kv.ErrNoLeader)
	}
	if err := n.rn.Propose(n.encodeEntry(batch)); err != nil {
		if errors.Is(err, raft.ErrProposalDropped) {
			return nil, fmt.Errorf("sim: %s: %w", n.name, kv.ErrDropped)
		}
		return nil, fmt.Errorf("sim: %s: propose: %w", n.name, err)
	}
	return proposal{}, nil
}

var errLinearizable = errors.New("sim: linearizable reads are not simulated")

func (n *node) Get(_ context.Context, key string, linearizable bool) (kv.Record, bool, error) {
	if linearizable {
		return kv.Record{}, false, errLinearizable
	}
	if !n.up {
		return kv.Record{}, false, kv.ErrStopped
	}
	r, ok := n.st.Keys[key]
	return r, ok, nil
}

func (n *node) List(_ context.Context, prefix string, linearizable bool) ([]kv.Record, error) {
	if linearizable {
		return nil, errLinearizable
	}
	if !n.up {
		return nil, kv.ErrStopped
	}
	var out []kv.Record
	for _, k := range sortedKeys(n.st.Keys) {
		if len(k) >= len(prefix) && k[:len(prefix)] == prefix {
			out = append(out, n.st.Keys[k])
		}
	}
	return out, nil
}

func (n *node) Outcome(id string) (kv.Result, bool) {
	if !n.up {
		return kv.Result{}, false
	}
	r, ok := n.st.Outcomes[id]
	return r, ok
}

func (n *node) Status() kv.LogStatus {
	s := kv.LogStatus{NodeID: n.name}
	if !n.up {
		return s
	}
	bs := n.rn.BasicStatus()
	if n.lead != raft.None {
		s.LeaderID = n.w.nameOf(n.lead)
	}
	s.IsLeader, s.Term, s.Commit, s.Applied = n.isLeader, bs.GetTerm(), bs.GetCommit(), n.st.Applied
	return s
}

type raftLogger struct{}

func (raftLogger) Debug(...any)            {}
func (raftLogger) Debugf(string, ...any)   {}
func (raftLogger) Info(...any)             {}
func (raftLogger) Infof(string, ...any)    {}
func (raftLogger) Warning(...any)          {}
func (raftLogger) Warningf(string, ...any) {}
func (raftLogger) Error(...any)            {}
func (raftLogger) Errorf(string, ...any)   {}
func (raftLogger) Fatal(v ...any)          { panic(fmt.Sprint(v...)) }
func (raftLogger) Fatalf(f string, v ...any) {
	panic(fmt.Sprintf(f, v...))
}
func (raftLogger) Panic(v ...any) { panic(fmt.Sprint(v...)) }
func (raftLogger) Panicf(f string, v ...any) {
	panic(fmt.Sprintf(f, v...))
}
