package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/node/config"
	"github.com/writ-dev/writ/pipeline"
	"github.com/writ-dev/writ/schema/ir"
)

// Every schema has config-class types of its own plus writ's cluster
// settings (config.ClusterType). A schema may declare cluster.config itself
// (the jobs schema does, so its handlers see the same type); otherwise the
// node adds it to the catalog here, validated by node/config's one table of
// keys and ranges. The built-in type is not part of the schema's model or
// fingerprint, so plugins built for the schema keep matching.
//
// The activated document of every config type is the value of the type's
// declared key (the pipeline writes it at activation): handlers read the
// active configuration of their schema there (lease.config at
// _config/lease), and `writctl config show --type T` shows it.

// builtinClusterNumber is the type number of the built-in cluster.config
// (the top of the number space, which schemas are not expected to use).
const builtinClusterNumber = math.MaxUint32

// withClusterConfig returns cat with the built-in cluster.config added
// when the schema does not declare one.
func withClusterConfig(cat ir.Catalog) ir.Catalog {
	if _, ok := cat.Type(config.ClusterType); ok {
		return cat
	}
	parse := func(b []byte) (ir.Payload, error) {
		c, err := config.ParseCluster(b, "json")
		if err != nil {
			fe := &ir.FieldError{Type: config.ClusterType, Field: "document", Rule: "settings table", Msg: err.Error()}
			var ce *config.Error
			if errors.As(err, &ce) && ce.Key != "" {
				fe.Field, fe.Msg = ce.Key, ce.Msg+": "+ce.Fix
			}
			return nil, fe
		}
		return clusterPayload(c.Payload()), nil
	}
	d := &ir.TypeDesc{Name: config.ClusterType, Number: builtinClusterNumber, Class: ir.ClassConfig,
		Entry: &ir.Entry{Name: config.ClusterType, Number: builtinClusterNumber, Class: ir.ClassConfig, Keys: []string{config.ClusterKey},
			Doc: "writ's own cluster settings (built in: the schema declares no cluster.config)"},
		ParseJSON: parse, ParseBinary: parse}
	return &builtinCatalog{Catalog: cat, cluster: d, types: append(cat.Types(), d)}
}

type builtinCatalog struct {
	ir.Catalog
	cluster *ir.TypeDesc
	types   []*ir.TypeDesc
}

func (c *builtinCatalog) Type(name string) (*ir.TypeDesc, bool) {
	if name == config.ClusterType {
		return c.cluster, true
	}
	return c.Catalog.Type(name)
}

func (c *builtinCatalog) TypeByNumber(n uint32) (*ir.TypeDesc, bool) {
	if n == builtinClusterNumber {
		return c.cluster, true
	}
	return c.Catalog.TypeByNumber(n)
}

func (c *builtinCatalog) Types() []*ir.TypeDesc { return append([]*ir.TypeDesc(nil), c.types...) }

// clusterPayload is a validated cluster document in canonical JSON; its
// binary encoding is the same JSON.
type clusterPayload []byte

func (p clusterPayload) EntryType() string                     { return config.ClusterType }
func (p clusterPayload) Validate() error                       { return nil }
func (p clusterPayload) AppendBinary(b []byte) ([]byte, error) { return append(b, p...), nil }
func (p clusterPayload) Keys() []string                        { return []string{config.ClusterKey} }
func (p clusterPayload) InstanceKey() string                   { return "" }
func (p clusterPayload) TargetState() string                   { return "" }
func (p clusterPayload) Order() (uint64, bool)                 { return 0, false }
func (p clusterPayload) IdempotencyKey() string                { return "" }
func (p clusterPayload) Items() []ir.Payload                   { return nil }
func (p clusterPayload) MarshalJSON() ([]byte, error)          { return p, nil }

// configTypes lists the schema's own config-class types (not the built-in
// cluster.config), sorted.
func configTypes(cat ir.Catalog) []string {
	var out []string
	for _, t := range cat.Types() {
		if t.Class == ir.ClassConfig && t.Number != builtinClusterNumber {
			out = append(out, t.Name)
		}
	}
	sort.Strings(out)
	return out
}

// configType resolves a requested config type: "" is the schema's only
// config type (cluster.config when it declares none).
func (n *Node) configType(typ string) (*ir.TypeDesc, error) {
	if typ == "" {
		switch ts := configTypes(n.cat); len(ts) {
		case 0:
			typ = config.ClusterType
		case 1:
			typ = ts[0]
		default:
			return nil, &api.Error{Outcome: api.Rejected, Field: "type",
				Reason: fmt.Sprintf("the schema has %d config types (%s, and writ's %s): name one with --type", len(ts), strings.Join(ts, ", "), config.ClusterType)}
		}
	}
	d, ok := n.cat.Type(typ)
	if !ok || d.Class != ir.ClassConfig {
		all := append(configTypes(n.cat), config.ClusterType)
		why := "is not declared by the schema"
		if ok {
			why = "is class " + d.Class.String() + ", not config"
		}
		return nil, &api.Error{Outcome: api.Rejected, Field: "type", Reason: fmt.Sprintf("config type %q %s: use one of %s", typ, why, strings.Join(dedup(all), ", "))}
	}
	return d, nil
}

// configKey is where a config type's activated document lives: its first
// declared key ("" when it declares none without placeholders).
func configKey(d *ir.TypeDesc) string {
	if d.Entry != nil {
		for _, k := range d.Entry.Keys {
			if !strings.Contains(k, "{") {
				return k
			}
		}
	}
	return ""
}

// ConfigShowType returns the active document of a config type.
func (w *writer) ConfigShowType(ctx context.Context, typ string) (api.ConfigState, error) {
	n := w.n
	d, err := n.configType(typ)
	if err != nil {
		return api.ConfigState{}, err
	}
	lctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if key := configKey(d); key != "" {
		rec, ok, err := n.rs.Get(lctx, key, true)
		if err != nil {
			return api.ConfigState{}, &api.Error{Outcome: api.Unavailable, Reason: fmt.Sprintf("cannot confirm the active %s with a quorum (%v)", d.Name, err)}
		}
		if ok && rec.Rev != 0 {
			return api.ConfigState{Type: d.Name, Tag: versionOf(rec.Value), Document: rec.Value, Index: rec.Rev, Activated: true}, nil
		}
	}
	// Activations recorded before the per-type key existed: the committed
	// tag, when it is of this type.
	t, ok, err := n.pl.CommittedConfig(lctx, true)
	if err != nil {
		local := "none activated"
		if lt, lok, lerr := n.pl.CommittedConfig(ctx, false); lerr == nil && lok {
			local = "tag " + versionOf(lt.Doc)
		}
		return api.ConfigState{}, &api.Error{Outcome: api.Unavailable,
			Reason: fmt.Sprintf("cannot confirm the committed configuration with a quorum (%v); this node's applied view: %s", err, local)}
	}
	if ok && t.Type == d.Name {
		st := api.ConfigState{Type: d.Name, Tag: versionOf(t.Doc), Document: t.Doc, Activated: true}
		if rec, ok, err := n.rs.Get(ctx, pipeline.ConfigCommittedKey, false); err == nil && ok {
			st.Index = rec.Rev
		}
		return st, nil
	}
	if d.Name == config.ClusterType {
		n.mu.Lock()
		cur := n.current
		n.mu.Unlock()
		return api.ConfigState{Type: d.Name, Tag: "0", Document: config.ClusterOf(cur).Payload()}, nil
	}
	return api.ConfigState{Type: d.Name, Tag: ""}, nil
}

// checkConfigChange validates a change before it is staged: the document
// against its type (writ's table for cluster.config, the schema for the
// others) and its version against the active one, which it may not go
// below unless forced.
func (w *writer) checkConfigChange(ctx context.Context, d *ir.TypeDesc, c api.ConfigChange) error {
	if d.Name == config.ClusterType {
		if _, err := config.ParseCluster(c.Document, "json"); err != nil {
			return &api.Error{Outcome: api.Rejected, ID: c.ID, Field: "document", Reason: err.Error()}
		}
	} else if _, err := d.ParseJSON(c.Document); err != nil {
		e := &api.Error{Outcome: api.Rejected, ID: c.ID, Field: "document", Reason: err.Error()}
		var fe *ir.FieldError
		if errors.As(err, &fe) {
			e.Field = fe.Field
		}
		return e
	}
	next := versionOf(c.Document)
	if c.Force || next == "" {
		return nil
	}
	cur, err := w.ConfigShowType(ctx, d.Name)
	if err != nil {
		return err
	}
	if !cur.Activated {
		return nil
	}
	if cmp, ok := config.CompareVersions(next, cur.Tag); ok && cmp < 0 {
		return &api.Error{Outcome: api.Rejected, ID: c.ID, Field: "version",
			Reason: fmt.Sprintf("%s version %q is lower than the active %q: use a higher version, or pass --force to roll back on purpose", d.Name, next, cur.Tag)}
	}
	return nil
}

// onUserConfigActivated runs on every node when a config type other than
// writ's own settings activates: its document is already in the replicated
// state at the type's key, where the schema's handlers read it.
func (n *Node) onUserConfigActivated(a pipeline.ConfigActivation) {
	var v struct {
		Version json.RawMessage `json:"version"`
	}
	_ = json.Unmarshal(a.Doc, &v)
	n.log.Info("writd: configuration activated", "type", a.Type, "id", a.ID, "version", strings.Trim(string(v.Version), `"`), "generation", a.Generation, "index", a.Index)
}
