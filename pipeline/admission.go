package pipeline

import (
	"errors"
	"fmt"
	"sync/atomic"
)

// admission is the pipeline's admission control: a bound on the requests in
// flight through Submit, and (through the outbox) on the retained facts.
// A refused entry is answered at once, before it is queued or acknowledged:
// a request gets UNAVAILABLE (definitely not appended), a fact is not
// received, so its reporter retries.
type admission struct {
	inflight atomic.Int64
	// limit overrides Config.MaxInflight once set (SetMaxInflight; the
	// cluster setting max_inflight activates it live).
	limit        atomic.Int64
	refusedReqs  atomic.Uint64
	refusedFacts atomic.Uint64
}

// requestRetryAfter is the pause an overloaded request is told to wait.
const requestRetryAfter = "50ms"

// AdmissionStats is what admission control sees now and has refused since
// the pipeline started.
type AdmissionStats struct {
	Inflight, MaxInflight           int
	OutboxEntries, OutboxMaxEntries int
	OutboxBytes, OutboxMaxBytes     int64
	RefusedRequests, RefusedFacts   uint64
}

// SetMaxInflight changes the bound on requests in flight (n <= 0: back to
// Config.MaxInflight).
func (p *Pipeline) SetMaxInflight(n int) {
	p.adm.limit.Store(int64(max(n, 0)))
}

func (p *Pipeline) maxInflight() int {
	if n := p.adm.limit.Load(); n > 0 {
		return int(n)
	}
	return p.cfg.MaxInflight
}

// admitRequest takes an in-flight slot for a request, or answers it
// UNAVAILABLE "overloaded" (ok=false) when every slot is taken. The caller
// releases the slot (adm.inflight.Add(-1)) once the request has its outcome.
func (p *Pipeline) admitRequest(en Entry) (Outcome, bool) {
	n := p.adm.inflight.Add(1)
	limit := p.maxInflight()
	if limit <= 0 || n <= int64(limit) {
		return Outcome{}, true
	}
	p.adm.inflight.Add(-1)
	p.adm.refusedReqs.Add(1)
	if m := p.cfg.Metrics; m != nil {
		m.AdmissionRefused("inflight")
		class := ""
		typ := en.Type
		if d, ok := p.cat.Type(typ); ok {
			class = d.Class.String()
		} else {
			typ = ""
		}
		m.CountOutcome(typ, class, StatusUnavailable.String())
	}
	return Outcome{ID: en.ID, Type: en.Type, Status: StatusUnavailable, Reason: overloadReason(limit)}, false
}

func overloadReason(limit int) string {
	return fmt.Sprintf("overloaded: %d requests in flight on this node (max_inflight %d); definitely not appended, retry after %s", limit, limit, requestRetryAfter)
}

// RefuseIfFull is a cheap early check for a request that has not been
// decoded yet (the API's transport calls it before reading the call):
// when every in-flight slot is taken it counts the refusal and returns the
// UNAVAILABLE "overloaded" outcome (ok=true). Passing it reserves nothing;
// Submit still takes its slot or refuses.
func (p *Pipeline) RefuseIfFull() (Outcome, bool) {
	limit := p.maxInflight()
	if limit <= 0 || p.adm.inflight.Load() < int64(limit) {
		return Outcome{}, false
	}
	p.adm.refusedReqs.Add(1)
	if m := p.cfg.Metrics; m != nil {
		m.AdmissionRefused("inflight")
		m.CountOutcome("", "", StatusUnavailable.String())
	}
	return Outcome{Status: StatusUnavailable, Reason: overloadReason(limit)}, true
}

// addFacts makes facts durable within the outbox bounds.
func (p *Pipeline) addFacts(items []OutboxItem) error {
	err := p.outbox.AddBatchBounded(items, p.cfg.OutboxMaxEntries, p.cfg.OutboxMaxBytes)
	if err == nil {
		return nil
	}
	var full *OutboxFullError
	if errors.As(err, &full) {
		p.adm.refusedFacts.Add(uint64(len(items)))
		if m := p.cfg.Metrics; m != nil {
			for range items {
				m.AdmissionRefused(full.Reason)
			}
		}
		return err
	}
	return fmt.Errorf("pipeline: %d fact(s) not accepted: %w", len(items), err)
}

// Admission reports admission control's counters and bounds.
func (p *Pipeline) Admission() AdmissionStats {
	entries, bytes := p.outbox.Usage()
	return AdmissionStats{
		Inflight: int(max(p.adm.inflight.Load(), 0)), MaxInflight: p.maxInflight(),
		OutboxEntries: entries, OutboxMaxEntries: p.cfg.OutboxMaxEntries,
		OutboxBytes: bytes, OutboxMaxBytes: p.cfg.OutboxMaxBytes,
		RefusedRequests: p.adm.refusedReqs.Load(), RefusedFacts: p.adm.refusedFacts.Load(),
	}
}
