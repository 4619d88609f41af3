// Command writ-lease is the handler plugin of the lease test schema: writd
// runs it when started with --schema testdata/lease/schema.
package main

import (
	"context"
	"encoding/json"

	"github.com/writ-dev/writ/cmd/writd/testdata/lease/leasegen"
	"github.com/writ-dev/writ/plugins/sdk"
)

// lease is the document at lease/<id>.
type lease struct {
	Holder string `json:"holder"`
	TTLMs  int64  `json:"ttl_ms"`
}

// policyKey is where the activated lease.config document lives (the config
// type's declared key).
const policyKey = "_config/lease"

type policy struct {
	Version  string `json:"version"`
	Settings struct {
		MaxTTLMs int64 `json:"max_ttl_ms"`
	} `json:"settings"`
}

func main() {
	sdk.Serve(&sdk.Plugin{
		Name:    "writ-lease",
		Version: "0.1.0",
		Catalog: leasegen.Catalog(),
		Handlers: map[string]sdk.Handler{
			"lease.acquire": sdk.HandlerFunc(acquire),
			"lease.release": sdk.HandlerFunc(release),
			"lease.expired": sdk.HandlerFunc(expired),
		},
	})
}

func acquire(_ context.Context, c *sdk.Call) error {
	p, err := sdk.As[*leasegen.LeaseAcquire](c)
	if err != nil {
		return err
	}
	var pol policy
	if ok, err := c.GetJSON(policyKey, &pol); err != nil || !c.Known(policyKey) {
		return err
	} else if ok && pol.Settings.MaxTTLMs > 0 && p.TTLMs > pol.Settings.MaxTTLMs {
		return sdk.Rule("ttl_ms %d exceeds max_ttl_ms %d of lease policy %s; ask for a shorter lease", p.TTLMs, pol.Settings.MaxTTLMs, pol.Version)
	}
	key := "lease/" + p.LeaseID
	var cur lease
	held, err := c.GetJSON(key, &cur)
	if err != nil || !c.Known(key) {
		return err
	}
	if st, _, ok := c.MachineState("lease", p.LeaseID); held && ok && st == "HELD" {
		return sdk.Rule("lease %q is held by %q; wait for its release", p.LeaseID, cur.Holder)
	}
	if err := c.PutJSON(key, lease{Holder: p.Holder, TTLMs: p.TTLMs}); err != nil {
		return err
	}
	return c.SetResult(map[string]any{"lease_id": p.LeaseID, "holder": p.Holder})
}

func release(_ context.Context, c *sdk.Call) error {
	p, err := sdk.As[*leasegen.LeaseRelease](c)
	if err != nil {
		return err
	}
	key := "lease/" + p.LeaseID
	var cur lease
	held, err := c.GetJSON(key, &cur)
	if err != nil || !c.Known(key) {
		return err
	}
	if !held || cur.Holder != p.Holder {
		return sdk.Rule("lease %q is not held by %q", p.LeaseID, p.Holder)
	}
	c.Delete(key)
	return nil
}

func expired(_ context.Context, c *sdk.Call) error {
	p, err := sdk.As[*leasegen.LeaseExpired](c)
	if err != nil {
		return err
	}
	c.Delete("lease/" + p.LeaseID)
	b, _ := json.Marshal(map[string]string{"expired": p.LeaseID})
	return c.SetResultJSON(b)
}
