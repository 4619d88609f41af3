package pipeline

import (
	"context"
	"time"

	"github.com/writ-dev/writ/kv"
)

// OutboxStats describes the fact outbox.
type OutboxStats struct {
	Depth     int
	OldestAge time.Duration
	Items     []OutboxItem
	// Attempts counts, by fact ID, how often this node has proposed each
	// retained fact since it (re)started.
	Attempts map[string]uint32
}

// Outbox reports the retained facts (depth, oldest age, items, attempts).
func (p *Pipeline) Outbox() OutboxStats {
	items := p.outbox.Items()
	st := OutboxStats{Depth: len(items), Items: items}
	if len(items) > 0 {
		st.Attempts = make(map[string]uint32, len(items))
		p.mu.Lock()
		for _, it := range items {
			if e := p.live[it.ID]; e != nil && e.t != nil {
				st.Attempts[it.ID] = e.t.proposals
			} else {
				st.Attempts[it.ID] = 0
			}
		}
		p.mu.Unlock()
	}
	if len(items) > 0 {
		oldest := items[0].Received
		for _, it := range items[1:] {
			if it.Received.Before(oldest) {
				oldest = it.Received
			}
		}
		st.OldestAge = p.clock.Now().Sub(oldest)
	}
	return st
}

// NodeStatus is the pipeline's view of the node.
type NodeStatus struct {
	NodeID        string
	Fingerprint   string
	Log           kv.LogStatus
	Health        Health
	OpenConflicts int
	OutboxDepth   int
	OutboxOldest  time.Duration
	Queued        int
	InFlight      int
	Latches       int
	Applied       uint64
	Config        *ConfigTag
	OutboxErr     string
}

// Status gathers the node status; it reads conflict cases and the committed
// configuration from local applied state.
func (p *Pipeline) Status(ctx context.Context) NodeStatus {
	p.mu.Lock()
	st := NodeStatus{NodeID: p.cfg.NodeID, Fingerprint: p.cat.Fingerprint(), Queued: len(p.queue), Latches: len(p.latches), Applied: p.applied}
	for _, e := range p.live {
		if e.proposed {
			st.InFlight++
		}
	}
	p.mu.Unlock()
	if p.log != nil {
		st.Log = p.log.Status()
		h, n, err := p.Health(ctx)
		st.Health, st.OpenConflicts = h, n
		if err != nil {
			st.Health = HealthDegraded
		}
		if t, ok, err := p.CommittedConfig(ctx, false); err == nil && ok {
			st.Config = &t
		}
	}
	ob := p.Outbox()
	st.OutboxDepth, st.OutboxOldest = ob.Depth, ob.OldestAge
	if err := p.outbox.Err(); err != nil {
		st.OutboxErr = err.Error()
		st.Health = HealthDegraded
	}
	return st
}
