package raftstore

import (
	"time"

	"fmt"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/writ-dev/writ/kv"
)

// Applying committed entries to the state (the applier goroutine).

type appliedEntry struct {
	index   uint64
	term    uint64
	origin  uint64
	req     uint64
	cmds    []kv.Command
	results []kv.Result
}

func (n *Node) applyEntries(ents []*raftpb.Entry) error {
	if len(ents) == 0 {
		return nil
	}
	defer n.mapply(time.Now())
	cur := n.applied.Load()
	last := ents[len(ents)-1].GetIndex()
	var done []appliedEntry
	var st applyEffects
	err := n.st.apply(len(ents), func(atx *applyTx) error {
		for _, e := range ents {
			atx.cmds = nil
			err := func() (err error) {
				defer recoverApply(e, atx.current, &err)
				d, isCmd, err := n.applyEntry(atx, e, cur, &st)
				if isCmd {
					done = append(done, d)
				}
				return err
			}()
			if err != nil {
				return err
			}
		}
		if err := atx.finish(); err != nil {
			return err
		}
		meta := atx.mb
		if last > cur {
			// The applied index and its term: a snapshot built from this
			// state later names both.
			if err := meta.Put(keyApplied, putU64(last)); err != nil {
				return err
			}
			if err := meta.Put(keyAppliedTerm, putU64(ents[len(ents)-1].GetTerm())); err != nil {
				return err
			}
		}
		if st.membersChanged {
			n.mu.Lock()
			enc := encodeMembers(n.members)
			n.mu.Unlock()
			if err := meta.Put(keyMembers, enc); err != nil {
				return err
			}
		}
		// The configuration, whenever it changed (or was never recorded,
		// in state written by an older version): a snapshot built from
		// this state names it.
		if st.membersChanged || (last > cur && meta.Get(keyConfState) == nil) {
			cs, err := proto.Marshal(n.confState)
			if err != nil {
				return fmt.Errorf("raftstore: encode configuration: %w", err)
			}
			if err := meta.Put(keyConfState, cs); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("raftstore: apply entries %d..%d: %w", ents[0].GetIndex(), last, err)
	}
	if last > cur {
		n.setApplied(last)
	}
	// The state is visible to readers (the WAL holds it durably): tell the
	// observer, then the waiters.
	if obs := n.cfg.Observer; obs != nil {
		for _, d := range done {
			if err := observeApplied(obs, d); err != nil {
				// Roll back to the last commit, as a crash would: the
				// restart replays these entries to the observer again.
				n.st.discard()
				return err
			}
		}
	}
	n.mu.Lock()
	for _, d := range done {
		if d.origin != n.id {
			continue
		}
		if p, ok := n.waiters[d.req]; ok {
			delete(n.waiters, d.req)
			p.finish(d.results, nil)
		}
	}
	for _, id := range st.ccDone {
		if ch, ok := n.ccWaiters[id]; ok {
			delete(n.ccWaiters, id)
			close(ch)
		}
	}
	n.mu.Unlock()
	if st.removedSelf {
		return ErrRemoved
	}
	return nil
}

// applyEffects is what applying entries did beyond the state: membership
// changes and the conf changes whose waiters can be released.
type applyEffects struct {
	membersChanged bool
	removedSelf    bool
	ccDone         []uint64
}

// applyEntry applies one entry in the apply transaction; isCmd reports an
// applied batch of commands (d). cur is the applied index before this
// round: entries at or below it are replayed conf changes only.
func (n *Node) applyEntry(atx *applyTx, e *raftpb.Entry, cur uint64, st *applyEffects) (d appliedEntry, isCmd bool, err error) {
	idx := e.GetIndex()
	switch e.GetType() {
	case raftpb.EntryConfChange:
		cc := &raftpb.ConfChange{}
		if err := proto.Unmarshal(e.GetData(), cc); err != nil {
			return d, false, entryApplyError(e, "", 0, fmt.Errorf("decode conf change: %w", err))
		}
		// Always re-applied, also on replay: raft's configuration is
		// rebuilt from the snapshot plus these entries.
		if cs := n.applyConfChange(cc); cs != nil {
			n.confState = cs
		}
		self := n.applyMemberChange(cc, idx)
		if idx > cur {
			st.membersChanged = true
			n.confSinceSnap = true
			st.removedSelf = st.removedSelf || self
			if cc.GetId() != 0 {
				st.ccDone = append(st.ccDone, cc.GetId())
			}
		}
	case raftpb.EntryConfChangeV2:
		cc := &raftpb.ConfChangeV2{}
		if err := proto.Unmarshal(e.GetData(), cc); err != nil {
			return d, false, entryApplyError(e, "", 0, fmt.Errorf("decode conf change v2: %w", err))
		}
		if cs := n.applyConfChange(cc); cs != nil {
			n.confState = cs
		}
		if idx > cur {
			st.membersChanged = true
		}
	case raftpb.EntryNormal:
		if idx <= cur || len(e.GetData()) == 0 {
			return d, false, nil
		}
		if skip := n.skipIndex.Load(); skip != 0 && idx == skip {
			// Recorded by SkipEntry: applied as an empty entry.
			n.log.Warn("raftstore: applying a committed entry as empty, as recorded by offline recovery; this node's state may now differ from replicas that applied it",
				"index", idx, "term", e.GetTerm())
			if err := atx.mb.Delete(keySkip); err != nil {
				return d, false, err
			}
			n.skipIndex.Store(0)
			return d, false, nil
		}
		origin, req, cmds, err := decodeEnvelope(e.GetData())
		if err != nil {
			// Every replica fails alike; stopping beats diverging.
			return d, false, entryApplyError(e, "", 0, fmt.Errorf("decode (written by a newer version?): %w", err))
		}
		results, err := atx.applyCommands(idx, cmds, n.cfg.Checker)
		if err != nil {
			id, _ := atx.current()
			return d, false, entryApplyError(e, id, len(cmds), err)
		}
		return appliedEntry{index: idx, term: e.GetTerm(), origin: origin, req: req, cmds: cmds, results: results}, true, nil
	}
	return d, false, nil
}
