package handler

import (
	"context"

	"github.com/writ-dev/writ/examples/leases/leasesgen"
	"github.com/writ-dev/writ/plugins/sdk"
)

// Name and Version identify the plugin.
const (
	Name    = "writ-leases"
	Version = "0.1.0"
)

// Plugin returns the lease service handler plugin: one handler per
// evaluated (request or fact) entry type of the leases schema. The receipt
// lease.grant_batch is not evaluated itself: each of its items is a
// lease.acquire.
func Plugin() *sdk.Plugin {
	return &sdk.Plugin{
		Name:    Name,
		Version: Version,
		Catalog: leasesgen.Catalog(),
		Handlers: map[string]sdk.Handler{
			leasesgen.NameLeaseControl:      sdk.HandlerFunc(leaseControl),
			leasesgen.NameLeaseAcquire:      sdk.HandlerFunc(acquire),
			leasesgen.NameLeaseRelease:      sdk.HandlerFunc(release),
			leasesgen.NameLeaseRenew:        sdk.HandlerFunc(renew),
			leasesgen.NameHolderRegister:    sdk.HandlerFunc(register),
			leasesgen.NameHolderControl:     sdk.HandlerFunc(holderControl),
			leasesgen.NameLeaseExpiry:       sdk.HandlerFunc(expiry),
			leasesgen.NameHolderHeartbeat:   sdk.HandlerFunc(heartbeat),
			leasesgen.NameHolderSessionLost: sdk.HandlerFunc(sessionLost),
			leasesgen.NameHolderShutdown:    sdk.HandlerFunc(shutdown),
		},
	}
}

// leaseControl creates a lease (FREE) or retires it (RETIRED). The guard
// has already refused what the machine forbids (retiring a HELD lease,
// anything on a RETIRED one); the handler refuses creating a lease that
// exists, which the guard cannot see (HELD → FREE is a legal step for
// lease.release).
func leaseControl(_ context.Context, c *sdk.Call) error {
	p, err := sdk.As[*leasesgen.LeaseControl](c)
	if err != nil {
		return err
	}
	l, ok, err := loadLease(c, p.LeaseID)
	if err != nil || !c.Known(leaseKey(p.LeaseID)) {
		return err
	}
	switch p.Action {
	case "create":
		if ok {
			return sdk.Rule("lease %q already exists (%s, epoch %d); acquire it or pick a new lease_id", p.LeaseID, l.State, l.Epoch)
		}
		l = &Lease{LeaseID: p.LeaseID, MaxTTLMs: DefaultMaxTTLMs}
		if p.MaxTTLMs != nil {
			l.MaxTTLMs = *p.MaxTTLMs
		}
		if p.Note != nil {
			l.Note = *p.Note
		}
		l.State = Free
	case "retire":
		if !ok {
			return sdk.Rule("lease %q does not exist", p.LeaseID)
		}
		if l.State == Held {
			return sdk.Rule("lease %q is HELD by %q; release it before retiring it", p.LeaseID, l.Holder)
		}
		l.State, l.Holder, l.TTLMs, l.Renewals = Retired, "", 0, 0
		if p.Note != nil {
			l.Note = *p.Note
		}
	default:
		return sdk.Invalid("action", "unknown action %q; use create or retire", p.Action)
	}
	if err := c.PutJSON(leaseKey(p.LeaseID), l); err != nil {
		return err
	}
	return c.SetResult(Result{LeaseID: p.LeaseID, State: l.State, Epoch: l.Epoch})
}

// acquire grants a FREE or EXPIRED lease (or one that does not exist yet)
// to an ACTIVE holder with room for it, under a new epoch. A HELD lease
// never reaches the handler: the guard answers its acquire as a duplicate
// (already HELD) without granting anything.
func acquire(_ context.Context, c *sdk.Call) error {
	p, err := sdk.As[*leasesgen.LeaseAcquire](c)
	if err != nil {
		return err
	}
	l, h, ready, err := loadGrant(c, p.LeaseID, p.HolderID)
	if !ready {
		return err
	}
	if h == nil {
		return sdk.Rule("holder %q has not registered; send holder.register first", p.HolderID)
	}
	if h.State != Active {
		return sdk.Rule("holder %q is %s; only an ACTIVE holder acquires leases (register again)", p.HolderID, h.State)
	}
	if l == nil {
		l = &Lease{LeaseID: p.LeaseID, MaxTTLMs: DefaultMaxTTLMs}
	}
	switch l.State {
	case "", Free, Expired:
	default:
		return sdk.Rule("lease %q is %s and cannot be acquired", p.LeaseID, l.State)
	}
	if p.TTLMs > l.MaxTTLMs {
		return sdk.Invalid("ttl_ms", "ttl_ms %d exceeds lease %q's max_ttl_ms %d; ask for at most %d", p.TTLMs, p.LeaseID, l.MaxTTLMs, l.MaxTTLMs)
	}
	if int64(len(h.Held)) >= h.MaxLeases {
		return sdk.Rule("holder %q already holds %d lease(s), its max_leases; release one first", p.HolderID, len(h.Held))
	}
	l.State, l.Holder, l.Epoch, l.TTLMs, l.Renewals = Held, p.HolderID, l.Epoch+1, p.TTLMs, 0
	l.Tags = p.Tags
	if p.Note != nil {
		l.Note = *p.Note
	}
	h.add(p.LeaseID)
	if err := c.PutJSON(leaseKey(p.LeaseID), l); err != nil {
		return err
	}
	if err := c.PutJSON(holderKey(p.HolderID), h); err != nil {
		return err
	}
	return c.SetResult(Result{LeaseID: p.LeaseID, HolderID: p.HolderID, State: Held, Epoch: l.Epoch, TTLMs: l.TTLMs})
}

// release frees a lease: the holder gives back a HELD grant, or
// acknowledges that its EXPIRED grant ran out. Holder and epoch must be
// the grant's, so a late release of an older grant cannot free a newer one.
func release(_ context.Context, c *sdk.Call) error {
	p, err := sdk.As[*leasesgen.LeaseRelease](c)
	if err != nil {
		return err
	}
	l, h, ready, err := loadGrant(c, p.LeaseID, p.HolderID)
	if !ready {
		return err
	}
	if l == nil {
		return sdk.Rule("lease %q does not exist", p.LeaseID)
	}
	if l.Holder != p.HolderID || l.Epoch != p.Epoch {
		return sdk.Rule("lease %q is %s for holder %q at epoch %d, not %q at epoch %d; a release names the current grant", p.LeaseID, l.State, l.Holder, l.Epoch, p.HolderID, p.Epoch)
	}
	if l.State != Held && l.State != Expired {
		return sdk.Rule("lease %q is %s; only a HELD or EXPIRED lease is released", p.LeaseID, l.State)
	}
	l.State, l.Holder, l.TTLMs, l.Renewals = Free, "", 0, 0
	if err := c.PutJSON(leaseKey(p.LeaseID), l); err != nil {
		return err
	}
	if h != nil && h.remove(p.LeaseID) {
		if err := c.PutJSON(holderKey(p.HolderID), h); err != nil {
			return err
		}
	}
	return c.SetResult(Result{LeaseID: p.LeaseID, State: Free, Epoch: l.Epoch})
}

// renew extends the current grant of a HELD lease (no state change).
func renew(_ context.Context, c *sdk.Call) error {
	p, err := sdk.As[*leasesgen.LeaseRenew](c)
	if err != nil {
		return err
	}
	l, ok, err := loadLease(c, p.LeaseID)
	if err != nil || !c.Known(leaseKey(p.LeaseID)) {
		return err
	}
	if !ok {
		return sdk.Rule("lease %q does not exist", p.LeaseID)
	}
	if l.State != Held || l.Holder != p.HolderID || l.Epoch != p.Epoch {
		return sdk.Rule("lease %q is %s for holder %q at epoch %d; only the current grant (%q, epoch %d) renews, acquire it again", p.LeaseID, l.State, l.Holder, l.Epoch, p.HolderID, p.Epoch)
	}
	if p.TTLMs != nil {
		if *p.TTLMs > l.MaxTTLMs {
			return sdk.Invalid("ttl_ms", "ttl_ms %d exceeds lease %q's max_ttl_ms %d; ask for at most %d", *p.TTLMs, p.LeaseID, l.MaxTTLMs, l.MaxTTLMs)
		}
		l.TTLMs = *p.TTLMs
	}
	l.Renewals++
	if err := c.PutJSON(leaseKey(p.LeaseID), l); err != nil {
		return err
	}
	return c.SetResult(Result{LeaseID: p.LeaseID, HolderID: p.HolderID, State: Held, Epoch: l.Epoch, TTLMs: l.TTLMs, Renewals: l.Renewals})
}

// expiry moves a HELD lease to EXPIRED when the report names its current
// grant (holder and epoch). A report about an older grant is refused: the
// fact is kept in the log, and the lease (and its machine state) is left
// alone. The epoch is also the fact's order, so once a grant's expiry is
// recorded any report of an older epoch is stale at the guard.
func expiry(_ context.Context, c *sdk.Call) error {
	p, err := sdk.As[*leasesgen.LeaseExpiry](c)
	if err != nil {
		return err
	}
	l, h, ready, err := loadGrant(c, p.LeaseID, p.HolderID)
	if !ready {
		return err
	}
	if l == nil {
		return sdk.Rule("expiry report %s names lease %q, which does not exist", p.ReportID, p.LeaseID)
	}
	if l.Holder != p.HolderID || l.Epoch != p.Epoch {
		return sdk.Rule("expiry report %s is for holder %q at epoch %d; lease %q is granted to %q at epoch %d", p.ReportID, p.HolderID, p.Epoch, p.LeaseID, l.Holder, l.Epoch)
	}
	l.State, l.Renewals, l.Expiries = Expired, 0, l.Expiries+1
	if err := c.PutJSON(leaseKey(p.LeaseID), l); err != nil {
		return err
	}
	if h != nil && h.remove(p.LeaseID) {
		return c.PutJSON(holderKey(p.HolderID), h)
	}
	return nil
}
