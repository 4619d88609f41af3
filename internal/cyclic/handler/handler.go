// Package handler is the cyclic test domain's handler plugin: it keeps one
// document per target with the prober that watches it and the last probe
// it reported. The guard decides which probes count (order, epochs,
// terminal state); the handler only records them.
package handler

import (
	"context"

	"github.com/writ-dev/writ/internal/cyclic/cyclicgen"
	"github.com/writ-dev/writ/plugins/sdk"
)

// Name and Version identify the plugin.
const (
	Name    = "writ-cyclic"
	Version = "0.1.0"
)

// Target is the document at target/<target>.
type Target struct {
	Target string `json:"target"`
	Prober string `json:"prober"`
	Result string `json:"result,omitempty"`
	Seq    uint64 `json:"seq,omitempty"`
}

// Plugin returns the handler plugin of the cyclic test domain.
func Plugin() *sdk.Plugin {
	return &sdk.Plugin{Name: Name, Version: Version, Catalog: cyclicgen.Catalog(),
		Handlers: map[string]sdk.Handler{
			"target.watch": sdk.HandlerFunc(watch),
			"target.probe": sdk.HandlerFunc(probe),
		}}
}

func key(target string) string { return "target/" + target }

func watch(_ context.Context, c *sdk.Call) error {
	p, err := sdk.As[*cyclicgen.TargetWatch](c)
	if err != nil {
		return err
	}
	if _, _ = c.Get(key(p.Target)); !c.Known(key(p.Target)) {
		return nil // Get asked for the key: evaluated again with it
	}
	return c.PutJSON(key(p.Target), Target{Target: p.Target, Prober: p.Prober})
}

func probe(_ context.Context, c *sdk.Call) error {
	p, err := sdk.As[*cyclicgen.TargetProbe](c)
	if err != nil {
		return err
	}
	var t Target
	ok, err := c.GetJSON(key(p.Target), &t)
	if err != nil || !c.Known(key(p.Target)) {
		return err
	}
	if !ok {
		return sdk.Rule("probe %s names target %q, which nobody watches", p.ReportID, p.Target)
	}
	t.Prober, t.Result, t.Seq = p.Prober, p.Result, p.Seq
	return c.PutJSON(key(p.Target), t)
}
