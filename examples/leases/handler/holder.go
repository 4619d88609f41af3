package handler

import (
	"context"

	"github.com/writ-dev/writ/examples/leases/leasesgen"
	"github.com/writ-dev/writ/plugins/sdk"
)

// register creates a holder (ACTIVE) or brings a LOST one back; a LOST
// holder's leases expired when it was lost, so it comes back holding none.
// An ACTIVE holder's register never reaches the handler (the guard answers
// it as a duplicate).
func register(_ context.Context, c *sdk.Call) error {
	p, err := sdk.As[*leasesgen.HolderRegister](c)
	if err != nil {
		return err
	}
	h, ok, err := loadHolder(c, p.HolderID)
	if err != nil || !c.Known(holderKey(p.HolderID)) {
		return err
	}
	if !ok {
		h = &Holder{HolderID: p.HolderID}
	} else if h.State != Lost {
		return sdk.Rule("holder %q is %s; register a new holder_id", p.HolderID, h.State)
	}
	h.State, h.SessionTTLMs, h.MaxLeases, h.Labels = Active, p.SessionTTLMs, DefaultMaxLeases, p.Labels
	if p.MaxLeases != nil {
		h.MaxLeases = *p.MaxLeases
	}
	h.Address = ""
	if p.Address != nil {
		h.Address = *p.Address
	}
	if h.Held == nil {
		h.Held = []string{}
	}
	if err := c.PutJSON(holderKey(p.HolderID), h); err != nil {
		return err
	}
	return c.SetResult(Result{HolderID: p.HolderID, State: Active, Held: len(h.Held)})
}

// holderControl deregisters a holder that holds no lease, or evicts one:
// its session ends as if it had been lost and every lease it holds
// expires.
func holderControl(_ context.Context, c *sdk.Call) error {
	p, err := sdk.As[*leasesgen.HolderControl](c)
	if err != nil {
		return err
	}
	h, ok, err := loadHolder(c, p.HolderID)
	if err != nil || !c.Known(holderKey(p.HolderID)) {
		return err
	}
	if !ok {
		return sdk.Rule("holder %q does not exist", p.HolderID)
	}
	if p.Reason != nil {
		h.Reason = *p.Reason
	}
	switch p.Action {
	case "deregister":
		if n := len(h.Held); n > 0 {
			return sdk.Rule("holder %q still holds %d lease(s) (%v); release them first, or evict it", p.HolderID, n, h.Held)
		}
		h.State = Deregistered
	case "evict":
		if err := endSession(c, h, Expired); err != nil {
			return err
		}
		h.State, h.Losses = Lost, h.Losses+1
	default:
		return sdk.Invalid("action", "unknown action %q; use deregister or evict", p.Action)
	}
	if err := c.PutJSON(holderKey(p.HolderID), h); err != nil {
		return err
	}
	return c.SetResult(Result{HolderID: p.HolderID, State: h.State})
}

// endSession moves every lease h holds to state to (EXPIRED when the
// session was lost or evicted, FREE when the holder shut down cleanly):
// each lease document changes and its machine instance is moved by a
// guarded transition. h then holds nothing.
func endSession(c *sdk.Call, h *Holder, to string) error {
	// Read every lease first: one not in the given state makes the SDK ask
	// for it, and the entry is evaluated again.
	leases := make([]*Lease, 0, len(h.Held))
	for _, id := range h.Held {
		l, lok, err := loadLease(c, id)
		if err != nil {
			return err
		}
		if lok {
			leases = append(leases, l)
		}
	}
	for _, l := range leases {
		if l.State != Held || l.Holder != h.HolderID {
			continue // released, expired or granted again meanwhile
		}
		l.State, l.TTLMs, l.Renewals = to, 0, 0
		if to == Expired {
			l.Expiries++
		} else {
			l.Holder = ""
		}
		if err := c.PutJSON(leaseKey(l.LeaseID), l); err != nil {
			return err
		}
		c.Transition("lease", l.LeaseID, to)
	}
	h.Held = []string{}
	return nil
}

// heartbeat records a holder's latest report; older or repeated sequences
// change nothing. It moves no machine state.
func heartbeat(_ context.Context, c *sdk.Call) error {
	p, err := sdk.As[*leasesgen.HolderHeartbeat](c)
	if err != nil {
		return err
	}
	h, ok, err := reportedHolder(c, "heartbeat", p.ReportID, p.HolderID)
	if !ok {
		return err
	}
	if p.Seq <= h.Seq && h.Seq > 0 {
		return nil // older or repeated heartbeat: keep the newer one
	}
	if h.State == Deregistered {
		return nil // a late heartbeat of a holder that is gone
	}
	h.Seq, h.Load, h.Reported = p.Seq, p.Load, p.Held
	h.Status = ""
	if p.Status != nil {
		h.Status = *p.Status
	}
	return c.PutJSON(holderKey(p.HolderID), h)
}

// sessionLost marks a holder LOST and expires every lease it holds: each
// lease document goes to EXPIRED and its machine instance is moved by a
// guarded transition, exactly as a lease.expiry would.
func sessionLost(_ context.Context, c *sdk.Call) error {
	p, err := sdk.As[*leasesgen.HolderSessionLost](c)
	if err != nil {
		return err
	}
	h, ok, err := reportedHolder(c, "session loss", p.ReportID, p.HolderID)
	if !ok {
		return err
	}
	if err := endSession(c, h, Expired); err != nil {
		return err
	}
	h.State, h.Losses, h.LostBy = Lost, h.Losses+1, p.DetectedBy
	return c.PutJSON(holderKey(p.HolderID), h)
}

// shutdown: the holder reports a clean shutdown. Every lease it holds is
// released (FREE, by guarded transitions) and the holder is DEREGISTERED.
func shutdown(_ context.Context, c *sdk.Call) error {
	p, err := sdk.As[*leasesgen.HolderShutdown](c)
	if err != nil {
		return err
	}
	h, ok, err := reportedHolder(c, "shutdown report", p.ReportID, p.HolderID)
	if !ok {
		return err
	}
	if err := endSession(c, h, Free); err != nil {
		return err
	}
	h.State, h.Reason = Deregistered, ""
	if p.Reason != nil {
		h.Reason = *p.Reason
	}
	return c.PutJSON(holderKey(p.HolderID), h)
}

// reportedHolder loads the holder a fact report names. ok is false when
// the handler is to return err at once: a read error, the holder's
// document not yet supplied (err is nil; the SDK asks for it and evaluates
// again), or a holder that never registered (a rule error naming the
// report).
func reportedHolder(c *sdk.Call, report, reportID, id string) (h *Holder, ok bool, err error) {
	h, found, err := loadHolder(c, id)
	if err != nil || !c.Known(holderKey(id)) {
		return nil, false, err
	}
	if !found {
		return nil, false, sdk.Rule("%s %s names holder %q, which has not registered", report, reportID, id)
	}
	return h, true, nil
}
