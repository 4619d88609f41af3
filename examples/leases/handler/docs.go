package handler

import (
	"slices"

	"github.com/writ-dev/writ/plugins/sdk"
)

// Lease is the document at lease/<lease_id>.
type Lease struct {
	LeaseID string `json:"lease_id"`
	// State mirrors the lease machine's state.
	State string `json:"state"`
	// Holder is the current holder while HELD, and the holder whose grant
	// ran out while EXPIRED.
	Holder string `json:"holder,omitempty"`
	// Epoch is the fencing token of the latest grant: it grows by one with
	// every acquire and is never reused, so a resource guarded by the lease
	// can refuse writes carrying an older epoch.
	Epoch uint64 `json:"epoch"`
	// TTLMs is the current grant's time to live.
	TTLMs int64 `json:"ttl_ms,omitempty"`
	// MaxTTLMs bounds every grant's TTL.
	MaxTTLMs int64    `json:"max_ttl_ms"`
	Tags     []string `json:"tags,omitempty"`
	Note     string   `json:"note,omitempty"`
	// Renewals counts renewals of the current grant.
	Renewals int `json:"renewals,omitempty"`
	// Expiries counts grants that ran out.
	Expiries int `json:"expiries,omitempty"`
}

// Holder is the document at holder/<holder_id>.
type Holder struct {
	HolderID     string   `json:"holder_id"`
	State        string   `json:"state"`
	SessionTTLMs int64    `json:"session_ttl_ms"`
	MaxLeases    int64    `json:"max_leases"`
	Address      string   `json:"address,omitempty"`
	Labels       []string `json:"labels,omitempty"`
	// Held lists the leases the holder holds, sorted.
	Held []string `json:"held"`
	// Seq is the sequence of the last applied heartbeat.
	Seq    uint64   `json:"seq,omitempty"`
	Load   *float64 `json:"load,omitempty"`
	Status string   `json:"status,omitempty"`
	// Reported is the lease list of the last heartbeat, when it carried one.
	Reported []string `json:"reported,omitempty"`
	// Losses counts lost sessions; LostBy names the last detector.
	Losses int    `json:"losses,omitempty"`
	LostBy string `json:"lost_by,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// Result is the document a committed request returns to its requester.
type Result struct {
	LeaseID  string `json:"lease_id,omitempty"`
	HolderID string `json:"holder_id,omitempty"`
	State    string `json:"state"`
	Epoch    uint64 `json:"epoch,omitempty"`
	TTLMs    int64  `json:"ttl_ms,omitempty"`
	Renewals int    `json:"renewals,omitempty"`
	Held     int    `json:"held,omitempty"`
}

// Lease and holder states.
const (
	Free    = "FREE"
	Held    = "HELD"
	Expired = "EXPIRED"
	Retired = "RETIRED"

	Active       = "ACTIVE"
	Lost         = "LOST"
	Deregistered = "DEREGISTERED"
)

// Defaults for a lease created implicitly by its first acquire, and for a
// holder that does not say how many leases it may hold.
const (
	DefaultMaxTTLMs  = 3_600_000
	DefaultMaxLeases = 64
)

func leaseKey(id string) string      { return "lease/" + id }
func holderKey(id string) string     { return "holder/" + id }
func machineKey(m, id string) string { return sdk.MachinePrefix + m + "/" + id }

// state returns the instance's authoritative state: the machine record when
// the pipeline supplied it (and the instance exists), else the document's
// mirror. It never asks for the machine record.
func state(c *sdk.Call, machine, id, mirror string) string {
	if c.Known(machineKey(machine, id)) {
		if s, _, ok := c.MachineState(machine, id); ok {
			return s
		}
	}
	return mirror
}

func loadLease(c *sdk.Call, id string) (*Lease, bool, error) {
	l := new(Lease)
	ok, err := c.GetJSON(leaseKey(id), l)
	if err != nil || !ok {
		return nil, false, err
	}
	l.State = state(c, "lease", id, l.State)
	return l, true, nil
}

func loadHolder(c *sdk.Call, id string) (*Holder, bool, error) {
	h := new(Holder)
	ok, err := c.GetJSON(holderKey(id), h)
	if err != nil || !ok {
		return nil, false, err
	}
	h.State = state(c, "holder", id, h.State)
	return h, true, nil
}

func (h *Holder) add(lease string) {
	if i, found := slices.BinarySearch(h.Held, lease); !found {
		h.Held = slices.Insert(h.Held, i, lease)
	}
}

func (h *Holder) remove(lease string) bool {
	if i, found := slices.BinarySearch(h.Held, lease); found {
		h.Held = slices.Delete(h.Held, i, i+1)
		return true
	}
	return false
}

// loadGrant loads the lease and the holder an entry names, each nil if it
// does not exist. ready is false when the handler is to return err at
// once: a read error, or a document not yet supplied (err is nil; the SDK
// asks for it and evaluates again).
func loadGrant(c *sdk.Call, leaseID, holderID string) (l *Lease, h *Holder, ready bool, err error) {
	l, _, err = loadLease(c, leaseID)
	if err != nil {
		return nil, nil, false, err
	}
	h, _, err = loadHolder(c, holderID)
	if err != nil || !c.Known(leaseKey(leaseID)) || !c.Known(holderKey(holderID)) {
		return nil, nil, false, err
	}
	return l, h, true, nil
}
