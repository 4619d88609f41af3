package pipeline

import (
	"time"
)

// Metrics receives the pipeline's measurements (Config.Metrics). Calls come
// from the write path, some with the pipeline's lock held: an
// implementation must be cheap and must not call back into the pipeline.
// Nil disables measurement at the cost of a nil check per call site.
type Metrics interface {
	// ObserveStage records how long one stage took: "validate" (per entry),
	// "evaluate", "append" and "commit_wait" (per batch).
	ObserveStage(stage string, d time.Duration)
	// CountOutcome counts one entry's outcome: COMMITTED, REJECTED,
	// UNAVAILABLE, UNCERTAIN (requests), RECEIVED (facts at ingress) or, for
	// the guard's verdict, duplicate, stale and quarantined.
	CountOutcome(typ, class, outcome string)
	// LatchWait counts a queued entry that had to wait for a key latch
	// (once per entry).
	LatchWait()
	// AdmissionRefused counts an entry refused at ingress.
	AdmissionRefused(reason string)
}

// Stage names reported to Metrics.
const (
	stageValidate   = "validate"
	stageEvaluate   = "evaluate"
	stageAppend     = "append"
	stageCommitWait = "commit_wait"
)

// mstart reads the clock only when something measures.
func (p *Pipeline) mstart() time.Time {
	if p.cfg.Metrics == nil {
		return time.Time{}
	}
	return time.Now()
}

func (p *Pipeline) mstage(stage string, t0 time.Time) {
	if p.cfg.Metrics != nil && !t0.IsZero() {
		p.cfg.Metrics.ObserveStage(stage, time.Since(t0))
	}
}

// mlatch counts an entry's first wait for a latch (the flush loop finds
// it latched again at every pass until the holder finishes).
func (p *Pipeline) mlatch(e *entry) {
	if p.cfg.Metrics != nil && !e.waited {
		e.waited = true
		p.cfg.Metrics.LatchWait()
	}
}

func (p *Pipeline) mrefused(typ, reason string) {
	if m := p.cfg.Metrics; m != nil {
		m.AdmissionRefused(reason)
		class := ""
		if d, ok := p.cat.Type(typ); ok {
			class = d.Class.String()
		} else {
			typ = "" // unknown types are not label values: one series for all
		}
		m.CountOutcome(typ, class, StatusRejected.String())
	}
}

// mreceived counts facts made durable at ingress.
func (p *Pipeline) mreceived(es []*entry) {
	if m := p.cfg.Metrics; m != nil {
		for _, e := range es {
			m.CountOutcome(e.typ, e.class.String(), "RECEIVED")
		}
	}
}

// outcomeLabel is the most specific outcome of an entry: the guard's
// verdict when it recorded the entry without applying it, else its status.
func outcomeLabel(st Status, v Verdict, dup bool) string {
	switch {
	case dup || v == VerdictDuplicate:
		return "duplicate"
	case v == VerdictStale:
		return "stale"
	case v == VerdictQuarantine:
		return "quarantined"
	}
	return st.String()
}

// mfinished counts a request's (or configuration change's) outcome.
func (p *Pipeline) mfinished(e *entry, out Outcome) {
	if m := p.cfg.Metrics; m != nil {
		m.CountOutcome(e.typ, e.class.String(), outcomeLabel(out.Status, out.Verdict, out.Duplicate))
		p.mrequestDone(e, out)
	}
}

// mfactDone counts a fact leaving the outbox: committed (or recorded as a
// duplicate, stale or quarantined report), or vetoed at apply.
func (p *Pipeline) mfactDone(e *entry, vetoed bool) {
	if m := p.cfg.Metrics; m != nil {
		st := StatusCommitted
		if vetoed {
			st = StatusRejected
		}
		m.CountOutcome(e.typ, e.class.String(), outcomeLabel(st, e.verdict, false))
	}
}

// RequestTiming is one request's way through the pipeline, reported to
// Metrics implementations that also implement RequestObserver.
type RequestTiming struct {
	ID, Type, Status string
	// Total is ingress to outcome. Evaluate is ingress until the handler
	// answered (queueing, latches and the evaluation), Append the proposal,
	// CommitWait from the proposal until the outcome (commit, apply and
	// reply). A stage the request never reached is zero.
	Total, Evaluate, Append, CommitWait time.Duration
}

// RequestObserver is told about every finished request (for the "reply"
// stage and the slow-request log).
type RequestObserver interface {
	RequestDone(t RequestTiming)
}

type reqTiming struct {
	start, evaluated, appended time.Time
}

func (p *Pipeline) mtiming(now time.Time) *reqTiming {
	if _, ok := p.cfg.Metrics.(RequestObserver); !ok {
		return nil
	}
	return &reqTiming{start: now}
}

// mbatch records a batch stage and stamps the batch's requests.
func (p *Pipeline) mbatch(stage string, t0 time.Time, batch []*entry) {
	if p.cfg.Metrics == nil || t0.IsZero() {
		return
	}
	now := time.Now()
	p.cfg.Metrics.ObserveStage(stage, now.Sub(t0))
	for _, e := range batch {
		if e.tm == nil {
			continue
		}
		switch stage {
		case stageEvaluate:
			e.tm.evaluated = now
		case stageAppend:
			e.tm.appended = now
		}
	}
}

func (p *Pipeline) mrequestDone(e *entry, out Outcome) {
	ro, ok := p.cfg.Metrics.(RequestObserver)
	if !ok || e.tm == nil {
		return
	}
	now := time.Now()
	t := RequestTiming{ID: e.userID, Type: e.typ, Status: out.Status.String(), Total: now.Sub(e.tm.start)}
	last := e.tm.start
	if !e.tm.evaluated.IsZero() {
		t.Evaluate, last = e.tm.evaluated.Sub(last), e.tm.evaluated
	}
	if !e.tm.appended.IsZero() {
		t.Append, last = e.tm.appended.Sub(last), e.tm.appended
		t.CommitWait = now.Sub(last)
	}
	ro.RequestDone(t)
}
