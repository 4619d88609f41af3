package pipeline

import (
	"context"
	"fmt"
	"strings"

	"github.com/writ-dev/writ/schema/ir"
)

// Resolution is the audit record a resolve writes into its case: who
// resolved it, when (the proposer's clock, RFC 3339), why, and which case
// revision it closed.
type Resolution struct {
	By            string `json:"by"`
	At            string `json:"at"`
	Reason        string `json:"reason"`
	ApplyIncoming bool   `json:"apply_incoming,omitempty"`
	CaseRevision  uint64 `json:"case_revision"`
}

// ResolveRequest asks to close one conflict case.
type ResolveRequest struct {
	// Key is the case's key, _conflict/<machine>/<instance> (the prefix may
	// be left out).
	Key string
	// Reason says why the case is closed; required.
	Reason string
	// By names who resolves it (the caller's identity, or "anonymous"
	// with the peer address).
	By string
}

// ParseConflictKey splits a conflict case key (with or without the
// _conflict/ prefix) into machine and instance.
func ParseConflictKey(key string) (machine, instance string, err error) {
	k := strings.TrimPrefix(key, ConflictPrefix)
	machine, instance, ok := strings.Cut(k, "/")
	if !ok || machine == "" || instance == "" {
		return "", "", fmt.Errorf("pipeline: conflict key %q: want %s<machine>/<instance>, e.g. %sjob/j1 (see writctl conflicts list)", key, ConflictPrefix, ConflictPrefix)
	}
	return machine, instance, nil
}

// ResolveConflictAs closes a conflict case through the log, as a
// request-class command, recording r as the case's Resolution. Outcomes are
// those of ResolveConflict; the closing command is on the watch stream
// (type writ.conflict.resolve, key the case's key).
func (p *Pipeline) ResolveConflictAs(ctx context.Context, r ResolveRequest) Outcome {
	machine, instance, err := ParseConflictKey(r.Key)
	if err != nil {
		return reject(typeConflictResolve, "key", "format", err.Error())
	}
	if strings.TrimSpace(r.Reason) == "" {
		return reject(typeConflictResolve, "reason", "required", "reason is required: say why the case is closed (--reason TEXT)")
	}
	if r.By == "" {
		r.By = "anonymous"
	}
	key := ConflictKey(machine, instance)
	now := p.clock.Now()
	p.mu.Lock()
	if p.stopped {
		p.mu.Unlock()
		return Outcome{ID: key, Type: typeConflictResolve, Status: StatusUnavailable, Reason: ErrStopped.Error()}
	}
	e := &entry{kind: kindRequest, class: ir.ClassRequest, typ: typeConflictResolve, cmdID: "resolve:" + key, userID: key,
		inst: key, keys: []string{key}, x: &entryExtra{resolve: key, note: r.Reason, resolution: &Resolution{By: r.By, Reason: r.Reason}},
		deadline: p.deadlineAt(now.Add(p.cfg.CommitTimeout))}
	if cur := p.live[e.cmdID]; cur != nil && !cur.replied {
		p.mu.Unlock()
		return p.wait(ctx, &Handle{e: cur, p: p})
	}
	p.enqueueLocked(e, false)
	p.wakeup()
	e.h = Handle{e: e, p: p}
	p.mu.Unlock()
	return p.wait(ctx, &e.h)
}
