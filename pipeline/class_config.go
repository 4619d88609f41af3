package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/writ-dev/writ/kv"
	"github.com/writ-dev/writ/schema/ir"
)

// Configuration changes (W5) are three pipeline-internal command types over
// one staged record, _config/staged/<id>:
//
//	writ.config.stage     staged record absent → {"state":"staged"}
//	writ.config.activate  staged → activated, and the committed tag
//	                      _config/committed advances (CAS on both)
//	writ.config.abort     absent|staged → aborted
//
// Activate and abort both CAS the staged record's revision, so whichever is
// first in the log wins and the other is a recorded no-op. The requester is
// told COMMITTED only after the activation applied here; it is told the
// change failed only after the abort applied, so a change reported failed
// never activates. The reload hook (Config.OnConfigActivated) runs on every
// node only when an activation applies.
const (
	typeConfigStage    = "writ.config.stage"
	typeConfigActivate = "writ.config.activate"
	typeConfigAbort    = "writ.config.abort"
)

type stagedConfig struct {
	ID    string          `json:"id"`
	Type  string          `json:"type"`
	State string          `json:"state"` // staged | activated | aborted
	Doc   json.RawMessage `json:"doc,omitempty"`
}

// ConfigTag is the committed configuration, at ConfigCommittedKey.
type ConfigTag struct {
	ID         string          `json:"id"`
	Type       string          `json:"type"`
	Generation uint64          `json:"generation"`
	Doc        json.RawMessage `json:"doc"`
}

// ConfigUpgrade stages a configuration document, then activates it, and
// returns COMMITTED only after the activation committed and applied here.
// If activation is not confirmed within Config.ConfigTimeout the change is
// aborted: UNAVAILABLE means the abort won (it will never activate);
// UNCERTAIN means neither decision is known yet (the node keeps proposing
// the abort; query OutcomeOf with the ID).
func (p *Pipeline) ConfigUpgrade(ctx context.Context, en Entry) Outcome {
	return p.wait(ctx, p.ConfigUpgradeAsync(ctx, en))
}

// ConfigUpgradeAsync starts a configuration change and returns its handle.
func (p *Pipeline) ConfigUpgradeAsync(ctx context.Context, en Entry) *Handle {
	ps, bad := p.validate(en)
	if bad != nil {
		bad.ID = en.ID
		p.traceReject(en, bad)
		return doneHandle(p, *bad)
	}
	if ps.class != ir.ClassConfig {
		o := reject(en.Type, "type", "class config", fmt.Sprintf("type is class %s: use %s", ps.class, verbFor(ps.class)))
		o.ID = ps.id
		return doneHandle(p, o)
	}
	if !json.Valid(ps.json) {
		return doneHandle(p, reject(en.Type, "payload", "json", "configuration document is not valid JSON"))
	}
	now := p.clock.Now()
	p.mu.Lock()
	if p.stopped {
		p.mu.Unlock()
		return doneHandle(p, Outcome{ID: ps.id, Type: en.Type, Status: StatusUnavailable, Reason: ErrStopped.Error()})
	}
	id := configCmdID(ps.id, "stage")
	e := p.live[id]
	if e == nil || e.replied {
		e = &entry{kind: kindConfig, class: ir.ClassConfig, desc: ps.desc, typ: ps.desc.Name, cmdID: id, userID: ps.id,
			payload: ps.payload, json: ps.json, deadline: p.deadlineAt(now.Add(p.cfg.ConfigTimeout)),
			keys: append([]string{configStagedPrefix + ps.id, ConfigCommittedKey}, ps.payload.Keys()...)}
		p.trace("validate", e, 0, "ok")
		p.enqueueLocked(e, false)
		for _, ph := range []string{"activate", "abort"} {
			p.live[configCmdID(ps.id, ph)] = e
		}
		p.wakeup()
	}
	p.mu.Unlock()
	return &Handle{e: e, p: p}
}

func (p *Pipeline) setPhaseLocked(e *entry, ph cfgPhase) {
	e.phase = ph
	e.cmdID = configCmdID(e.userID, [...]string{"stage", "activate", "abort"}[ph])
}

// planConfig reads the staged record and decides the next command.
func (p *Pipeline) planConfig(ctx context.Context, log Log, e *entry) {
	if err := p.readState(ctx, log, e); err != nil {
		e.plan, e.planOut = planRetry, &Outcome{Status: StatusUnavailable, Reason: "reading state: " + err.Error()}
		return
	}
	srec, _ := e.stateOf(configStagedPrefix + e.userID)
	trec, _ := e.stateOf(ConfigCommittedKey)
	var st stagedConfig
	if srec.Rev != 0 {
		if err := json.Unmarshal(srec.Value, &st); err != nil {
			e.plan, e.planOut = planFinish, &Outcome{Status: StatusRejected, Reason: "staged record unreadable: " + err.Error()}
			return
		}
	}
	switch st.State {
	case "activated":
		if p.parkActivated(e, srec.Rev) {
			return // answered once the reload hook for the activation ran here
		}
		e.plan, e.planOut = planFinish, &Outcome{Status: StatusCommitted, Index: srec.Rev}
		return
	case "aborted":
		e.plan, e.planOut = planFinish, ptrTo(abortedOutcome(srec.Rev))
		return
	}
	p.mu.Lock()
	phase := e.phase
	if phase == phaseStage && st.State == "staged" {
		p.setPhaseLocked(e, phaseActivate)
		phase = phaseActivate
	}
	p.mu.Unlock()
	staged := stagedConfig{ID: e.userID, Type: e.typ, Doc: e.json}
	mk := func(typ string, v Verdict, writes ...kv.Write) {
		e.attempt = p.attempts.Add(1)
		*e.cmd = kv.Command{ID: e.cmdID, Type: typ, Class: uint8(ir.ClassConfig), Key: e.userID, Verdict: uint8(v),
			Guard: (&guardInfo{Attempt: e.attempt}).appendTo(nil), Payload: e.json, Origin: p.cfg.NodeID}
		e.cmd.Effect.Writes = writes
		e.plan = planPropose
	}
	switch phase {
	case phaseStage:
		staged.State = "staged"
		v, _ := json.Marshal(staged)
		mk(typeConfigStage, VerdictNone, kv.Write{Key: configStagedPrefix + e.userID, Value: v, IfRev: 0})
	case phaseActivate:
		var tag ConfigTag
		if trec.Rev != 0 {
			if err := json.Unmarshal(trec.Value, &tag); err != nil {
				e.plan, e.planOut = planFinish, &Outcome{Status: StatusRejected, Reason: "committed tag unreadable: " + err.Error()}
				return
			}
		}
		staged.State = "activated"
		sv, _ := json.Marshal(staged)
		next := ConfigTag{ID: e.userID, Type: e.typ, Generation: tag.Generation + 1, Doc: e.json}
		tv, _ := json.Marshal(next)
		writes := []kv.Write{{Key: configStagedPrefix + e.userID, Value: sv, IfRev: srec.Rev},
			{Key: ConfigCommittedKey, Value: tv, IfRev: trec.Rev}}
		// The activated document also becomes the value of the config
		// type's declared keys, where handlers read the active
		// configuration of their schema.
		for _, k := range e.keys[2:] {
			rec, _ := e.stateOf(k)
			writes = append(writes, kv.Write{Key: k, Value: e.json, IfRev: rec.Rev})
		}
		mk(typeConfigActivate, VerdictNone, writes...)
	case phaseAbort:
		staged.State = "aborted"
		v, _ := json.Marshal(staged)
		mk(typeConfigAbort, VerdictNone, kv.Write{Key: configStagedPrefix + e.userID, Value: v, IfRev: srec.Rev})
	}
}

func abortedOutcome(idx uint64) Outcome {
	return Outcome{Status: StatusUnavailable, Index: idx,
		Reason: "configuration change aborted: its activation was not committed in time; it will never activate (retry with a new ID)"}
}

func (p *Pipeline) resolveConfigLocked(e *entry, cmd *kv.Command, res kv.Result) {
	applied := res.Status == kv.StatusApplied || res.Status == kv.StatusDuplicate
	p.trace("apply", e, res.Index, cmd.Type+" "+res.Status.String())
	switch {
	case applied && cmd.Type == typeConfigActivate:
		e.everApplied = true
		if p.awaitReloadLocked(e, cmd, res) {
			// The proposal's waiter heard first: answer once the reload
			// hook for this index has run here.
			return
		}
		p.finishConfigLocked(e, Outcome{Status: StatusCommitted, Index: res.Index})
		return
	case applied && cmd.Type == typeConfigAbort:
		p.finishConfigLocked(e, abortedOutcome(res.Index))
		return
	case applied && cmd.Type == typeConfigStage:
		if e.phase == phaseStage {
			p.setPhaseLocked(e, phaseActivate)
		}
	default:
		if cmd.Origin != p.cfg.NodeID || guardAttempt(cmd.Guard) != e.attempt {
			return
		}
	}
	if !e.proposed {
		return
	}
	e.proposed = false
	p.unlatchLocked(e)
	p.enqueueLocked(e, true)
	p.wakeup()
}

func (p *Pipeline) finishConfigLocked(e *entry, out Outcome) {
	if e.replied {
		// The requester was told UNCERTAIN; record the definite decision.
		out.ID, out.Type = e.userID, e.typ
		p.outcomes.put(configCmdID(e.userID, "stage"), out)
		e.finished = true
		p.unlatchLocked(e)
		p.dropLiveLocked(e)
		return
	}
	p.finishLocked(e, out)
	e.finished = true
	p.unlatchLocked(e)
	p.dropLiveLocked(e)
}

// configTimeoutLocked switches an undecided change to abort. The first
// timeout turns to abort; a second one (abort not decided either) answers
// UNCERTAIN while the node keeps proposing the abort.
func (p *Pipeline) configTimeoutLocked(e *entry, why string) {
	if e.phase != phaseAbort {
		p.trace("timeout", e, 0, "abort: "+why)
		p.setPhaseLocked(e, phaseAbort)
		e.deadline = p.deadlineAt(p.clock.Now().Add(p.cfg.ConfigTimeout))
		if e.proposed {
			e.proposed = false
			p.unlatchLocked(e)
		}
		p.enqueueLocked(e, true)
		p.wakeup()
		return
	}
	e.deadline = 0
	p.finishLocked(e, Outcome{Status: StatusUncertain, Reason: why + ": neither activation nor abort is confirmed yet; the node keeps proposing the abort; query the outcome by ID"})
}

// CommittedConfig returns the committed configuration tag (ok=false when no
// configuration was ever activated).
func (p *Pipeline) CommittedConfig(ctx context.Context, linearizable bool) (ConfigTag, bool, error) {
	rec, ok, err := p.log.Get(ctx, ConfigCommittedKey, linearizable)
	if err != nil || !ok {
		return ConfigTag{}, false, err
	}
	var t ConfigTag
	if err := json.Unmarshal(rec.Value, &t); err != nil {
		return ConfigTag{}, false, fmt.Errorf("pipeline: committed config: %w", err)
	}
	return t, true, nil
}

// ConfigOutcome returns what is known about a configuration change by ID.
func (p *Pipeline) ConfigOutcome(id string) (Outcome, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	o, ok := p.outcomes.get(configCmdID(id, "stage"))
	return o, ok
}

// configTypeOf is the config entry type a stage, activate or abort command
// is about (from its staged record), for the watch stream.
func configTypeOf(cmd *kv.Command) string {
	for _, w := range cmd.Effect.Writes {
		if strings.HasPrefix(w.Key, configStagedPrefix) {
			var st stagedConfig
			if json.Unmarshal(w.Value, &st) == nil && st.Type != "" {
				return st.Type
			}
		}
	}
	return cmd.Type
}

func activationOf(cmd *kv.Command, index uint64) (ConfigActivation, bool) {
	for _, w := range cmd.Effect.Writes {
		if w.Key != ConfigCommittedKey {
			continue
		}
		var t ConfigTag
		if json.Unmarshal(w.Value, &t) != nil {
			return ConfigActivation{}, false
		}
		return ConfigActivation{ID: t.ID, Type: t.Type, Doc: []byte(t.Doc), Generation: t.Generation, Index: index}, true
	}
	return ConfigActivation{}, false
}
