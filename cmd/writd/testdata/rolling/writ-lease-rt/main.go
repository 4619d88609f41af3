// Command writ-lease-rt is the handler plugin of the rolling-upgrade test
// schemas (testdata/rolling/v1, v2, v3). It is built once and loads the
// schema from the directory "schema" next to its executable with the runtime
// catalog, so one binary serves every version; it handles the lease types
// the loaded schema declares.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/writ-dev/writ/node/schemadir"
	"github.com/writ-dev/writ/plugins/sdk"
)

type lease struct {
	Holder string `json:"holder"`
	TTLMs  int64  `json:"ttl_ms"`
}

type leaseArgs struct {
	LeaseID string `json:"lease_id"`
	Holder  string `json:"holder"`
	TTLMs   int64  `json:"ttl_ms"`
}

func main() {
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "writ-lease-rt:", err)
		os.Exit(1)
	}
	cat, _, err := schemadir.Load(filepath.Join(filepath.Dir(exe), "schema"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "writ-lease-rt:", err)
		os.Exit(1)
	}
	all := map[string]sdk.Handler{
		"lease.acquire": sdk.HandlerFunc(acquire),
		"lease.renew":   sdk.HandlerFunc(renew),
		"lease.release": sdk.HandlerFunc(release),
		"lease.expired": sdk.HandlerFunc(expired),
	}
	hs := map[string]sdk.Handler{}
	for name, h := range all {
		if _, ok := cat.Type(name); ok {
			hs[name] = h
		}
	}
	sdk.Serve(&sdk.Plugin{Name: "writ-lease-rt", Version: "0.1.0", Catalog: cat, Handlers: hs})
}

func args(c *sdk.Call) (leaseArgs, string, error) {
	var a leaseArgs
	if err := c.DecodePayload(&a); err != nil {
		return a, "", err
	}
	return a, "lease/" + a.LeaseID, nil
}

func acquire(_ context.Context, c *sdk.Call) error {
	a, key, err := args(c)
	if err != nil {
		return err
	}
	var cur lease
	held, err := c.GetJSON(key, &cur)
	if err != nil || !c.Known(key) {
		return err
	}
	if st, _, ok := c.MachineState("lease", a.LeaseID); held && ok && st == "HELD" {
		return sdk.Rule("lease %q is held by %q; wait for its release", a.LeaseID, cur.Holder)
	}
	if err := c.PutJSON(key, lease{Holder: a.Holder, TTLMs: a.TTLMs}); err != nil {
		return err
	}
	return c.SetResult(map[string]any{"lease_id": a.LeaseID, "holder": a.Holder})
}

func renew(_ context.Context, c *sdk.Call) error {
	a, key, err := args(c)
	if err != nil {
		return err
	}
	var cur lease
	held, err := c.GetJSON(key, &cur)
	if err != nil || !c.Known(key) {
		return err
	}
	if !held || cur.Holder != a.Holder {
		return sdk.Rule("lease %q is not held by %q", a.LeaseID, a.Holder)
	}
	if err := c.PutJSON(key, lease{Holder: a.Holder, TTLMs: a.TTLMs}); err != nil {
		return err
	}
	return c.SetResult(map[string]any{"lease_id": a.LeaseID, "holder": a.Holder, "ttl_ms": a.TTLMs})
}

func release(_ context.Context, c *sdk.Call) error {
	a, key, err := args(c)
	if err != nil {
		return err
	}
	var cur lease
	held, err := c.GetJSON(key, &cur)
	if err != nil || !c.Known(key) {
		return err
	}
	if !held || cur.Holder != a.Holder {
		return sdk.Rule("lease %q is not held by %q", a.LeaseID, a.Holder)
	}
	c.Delete(key)
	return nil
}

func expired(_ context.Context, c *sdk.Call) error {
	a, key, err := args(c)
	if err != nil {
		return err
	}
	c.Delete(key)
	b, _ := json.Marshal(map[string]string{"expired": a.LeaseID})
	return c.SetResultJSON(b)
}
