package pipeline

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/writ-dev/writ/kv"
)

// The reload hook (Config.OnConfigActivated) runs on every node for every
// configuration that activates (W5), whichever way the activation reached
// the node's state:
//
//   - applied entry by entry: Applied runs it for each activation in the
//     batch, before any requester of that batch is answered;
//   - covered by a snapshot the log installed (a lagging node catching up):
//     Restored reads the committed tag and runs it when the tag is newer
//     than the configuration the hook last ran for;
//   - in the state the node starts with: Start runs it for the committed
//     tag, so a node that stopped after applying an activation but before
//     its hook ran (or installed a snapshot before Start) reloads it too;
//     for a node that had reloaded it already, this reloads the same
//     document again.
//
// The hook sees generations in increasing order and never the same one
// twice. A reply to an activation waits until the hook for its index has
// run here, even when the log wakes the proposal's waiter before it tells
// the observer.
type reloadState struct {
	// mu serialises hook calls and guards gen.
	mu sync.Mutex
	// gen is the generation of the newest configuration the hook ran for.
	gen uint64

	// Guarded by Pipeline.mu: through is the log index up to which every
	// activation's hook has run here; waiting holds activations whose
	// apply result arrived before their hook ran.
	through uint64
	waiting []*entry
}

// reload runs the hook for a unless a configuration of the same or a newer
// generation was already reloaded here. It must be called without p.mu.
func (p *Pipeline) reload(a ConfigActivation) {
	p.rl.mu.Lock()
	defer p.rl.mu.Unlock()
	if a.Generation <= p.rl.gen {
		return
	}
	p.rl.gen = a.Generation
	if p.cfg.OnConfigActivated != nil {
		p.cfg.OnConfigActivated(a)
	}
}

// committedActivation reads the committed tag as the activation that wrote
// it (its record's revision is the activation's index).
func (p *Pipeline) committedActivation(ctx context.Context) (ConfigActivation, bool) {
	rec, ok, err := p.log.Get(ctx, ConfigCommittedKey, false)
	if err != nil {
		p.lg.Error("pipeline: reading the committed configuration to reload it", "err", err)
		return ConfigActivation{}, false
	}
	if !ok {
		return ConfigActivation{}, false
	}
	var t ConfigTag
	if err := json.Unmarshal(rec.Value, &t); err != nil {
		p.lg.Error("pipeline: committed configuration unreadable; not reloaded", "err", err)
		return ConfigActivation{}, false
	}
	return ConfigActivation{ID: t.ID, Type: t.Type, Doc: []byte(t.Doc), Generation: t.Generation, Index: rec.Rev}, true
}

// reloadRestored runs the hook for an activation that a restored state
// covers. Before Start there is nothing to do: Start reloads the committed
// configuration.
func (p *Pipeline) reloadRestored(index uint64, started bool) {
	if started && !canarySnapshotSkipsReload {
		if a, ok := p.committedActivation(context.Background()); ok {
			if a.Generation > p.reloadedGen() {
				p.lg.Info("pipeline: the restored state carries a configuration activated while this node lagged; reloading it",
					"id", a.ID, "generation", a.Generation, "index", a.Index)
			}
			p.reload(a)
		}
	}
	p.mu.Lock()
	p.reloadedThroughLocked(index)
	p.mu.Unlock()
}

// reloadAtStart runs the hook for the configuration committed in the state
// the node starts with: the log cannot say whether the hook ran for it
// before the node stopped (the state is applied before the observer hears
// of it), nor whether it came with a snapshot installed before Start.
func (p *Pipeline) reloadAtStart() {
	if a, ok := p.committedActivation(context.Background()); ok && !canarySnapshotSkipsReload {
		p.reload(a)
	}
}

func (p *Pipeline) reloadedGen() uint64 {
	p.rl.mu.Lock()
	defer p.rl.mu.Unlock()
	return p.rl.gen
}

// reloadedThroughLocked records that every activation up to index has had
// its hook run here, and answers the activations that waited for it.
func (p *Pipeline) reloadedThroughLocked(index uint64) {
	if index <= p.rl.through {
		return
	}
	p.rl.through = index
	if len(p.rl.waiting) == 0 {
		return
	}
	keep := p.rl.waiting[:0]
	for _, e := range p.rl.waiting {
		x := e.extra()
		l := x.hookWait
		switch {
		case l == nil || e.finished:
			x.hookWait = nil
		case l.res.Index <= index:
			x.hookWait = nil
			p.resolveLocked(e, &l.cmd, l.res)
		default:
			keep = append(keep, e)
		}
	}
	clear(p.rl.waiting[len(keep):])
	p.rl.waiting = keep
}

// awaitReloadLocked reports whether the reply to an applied activation must
// wait for the reload hook of its index, and if so parks the result.
func (p *Pipeline) awaitReloadLocked(e *entry, cmd *kv.Command, res kv.Result) bool {
	if p.cfg.OnConfigActivated == nil || res.Index <= p.rl.through {
		return false
	}
	x := e.extra()
	if x.hookWait == nil {
		p.rl.waiting = append(p.rl.waiting, e)
	}
	x.hookWait = &lateResult{cmd: *cmd, res: res}
	return true
}

// parkActivated is awaitReloadLocked for an activation found applied in
// state (a re-evaluated entry) rather than reported by the log: the entry
// is answered when the reload hook for index has run here.
func (p *Pipeline) parkActivated(e *entry, index uint64) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	cmd := kv.Command{ID: configCmdID(e.userID, "activate"), Type: typeConfigActivate, Origin: p.cfg.NodeID}
	return p.awaitReloadLocked(e, &cmd, kv.Result{Status: kv.StatusApplied, Index: index})
}
