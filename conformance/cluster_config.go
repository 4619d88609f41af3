package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/writ-dev/writ/api/writv1"
	"github.com/writ-dev/writ/node/config"
	"github.com/writ-dev/writ/schema/ir"
)

func scConfigMajorityDown(ctx context.Context, e *Env, c *cluster) Outcome {
	var cfg *ir.Entry
	for _, en := range e.entries() {
		if en.Class == ir.ClassConfig {
			cfg = en
			break
		}
	}
	if cfg == nil {
		return notRun("the schema declares no config type")
	}
	s := c.nodes[0]
	docs := e.drawConfigDocs(cfg, 601, 2)
	if len(docs) < 2 {
		return notRun("could not draw two distinct valid configuration documents")
	}
	if e.Opts.doubles.configDoc != nil {
		for i := range docs {
			docs[i] = e.Opts.doubles.configDoc(docs[i])
		}
	}
	// First, with every node up, the same kind of upgrade must activate:
	// otherwise a failure with the majority down proves nothing (a
	// configuration that can never activate, say one refused at ingress,
	// would pass).
	pre, err := c.upgrade(ctx, s, "w6-pre", docs[0])
	c.out.Cases++
	if err != nil || !configConfirmed(pre) {
		return notRun("with all 3 nodes up the configuration upgrade did not activate (%s), so a majority loss cannot be shown to be what stops it; fix: make a valid %s document activate on a healthy cluster", describeProgress(pre, err), cfg.Name)
	}
	before, err := c.sameConfigTag(ctx, 20*time.Second)
	if err != nil {
		return notRun("with all 3 nodes up the activated configuration did not reach every node: %v", err)
	}
	c.kill(c.nodes[1])
	c.kill(c.nodes[2])
	last, _ := c.upgrade(ctx, s, "w6-up", docs[1])
	c.out.Cases++
	if configConfirmed(last) {
		c.fail("config", "a configuration change must not be confirmed without a majority (W5)", "upgrade confirmed with 2 of 3 nodes down: %v", last)
	}
	if now, err := c.status(ctx, s); err == nil && now.ConfigTag != before {
		c.fail("config", "the committed tag advances only on activation", "tag moved from %q to %q after a failed upgrade", before, now.ConfigTag)
	}
	if err := c.healthy(ctx); err != nil {
		return c.harnessBroke(err)
	}
	if err := c.converge(ctx, 30*time.Second); err != nil {
		c.fail("replicas", "replicas must converge", "%v", err)
	}
	time.Sleep(2 * time.Second)
	for _, n := range c.nodes {
		if now, err := c.status(ctx, n); err == nil && now.ConfigTag != before {
			c.fail("config", "a change reported as failed must never activate afterwards (W5)", "%s activated tag %q after the failed upgrade", n.Name, now.ConfigTag)
		}
	}
	return c.out
}

// drawConfigDocs draws n distinct valid documents of the config type, each
// one the cluster will accept after the one before it: a document refused at
// ingress would prove nothing about the barrier. A top-level "version" is
// made to increase (writd refuses a lower version than the active one), and
// writ's own cluster settings (config.ClusterType) are set to values that
// keep the shared cluster under test usable (the schema may allow a 10ms or a
// 999999h commit timeout; writd's table refuses the latter, and the former
// would break the scenarios after this one); the document must then pass
// writd's table of keys and ranges as well as the schema.
func (e *Env) drawConfigDocs(cfg *ir.Entry, seed uint64, n int) [][]byte {
	d := newDrawer(e.Schema, e.Opts.Seed, seed)
	var out [][]byte
	seen := map[string]bool{}
	for try := 0; try < 100 && len(out) < n; try++ {
		doc := d.object(cfg.Fields)
		if _, ok := doc["version"].(string); ok {
			doc["version"] = fmt.Sprintf("%d", 1000+len(out))
		}
		if cfg.Name == config.ClusterType {
			safeClusterSettings(cfg, doc)
		}
		data, _ := json.Marshal(doc)
		if cfg.Name == config.ClusterType {
			if _, err := config.ParseCluster(data, "json"); err != nil {
				continue
			}
		}
		if !seen[string(data)] && e.Load.CheckPayloadJSON(cfg.Name, data) == nil {
			seen[string(data)] = true
			out = append(out, data)
		}
	}
	return out
}

// safeClusterSettings replaces the drawn values of writ's own settings with
// the node defaults and drops the optional ones it has no default for, so
// activating the document tests the barrier without retuning the cluster
// under test.
func safeClusterSettings(cfg *ir.Entry, doc map[string]any) {
	st, ok := doc["settings"].(map[string]any)
	if !ok {
		return
	}
	optional := map[string]bool{}
	if f, ok := cfg.Field("settings"); ok && f != nil {
		for _, sf := range f.Fields {
			optional[sf.Name] = sf.Optional
		}
	}
	safe := map[string]any{"commit_timeout": "5s", "max_batch": 256, "log_level": "info"}
	for k := range st {
		if v, ok := safe[k]; ok {
			st[k] = v
		} else if optional[k] {
			delete(st, k)
		}
	}
}

// upgrade runs one configuration upgrade through n and returns its last
// progress message.
func (c *cluster) upgrade(ctx context.Context, n *node, id string, doc []byte) (*writv1.ConfigProgress, error) {
	cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	st, err := n.Client().ConfigUpgrade(cctx, &writv1.ConfigUpgradeRequest{RequestId: id, Document: doc, Format: "json", TimeoutMs: 2000})
	if err != nil {
		return nil, err
	}
	var last *writv1.ConfigProgress
	for {
		pr, err := st.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return last, nil
			}
			return last, err
		}
		last = pr
	}
}

func configConfirmed(p *writv1.ConfigProgress) bool {
	return p != nil && (p.Phase == writv1.ConfigProgress_ACTIVATED || p.Phase == writv1.ConfigProgress_RELOADED || p.Outcome == writv1.Outcome_COMMITTED)
}

func describeProgress(p *writv1.ConfigProgress, err error) string {
	switch {
	case p == nil && err != nil:
		return "error: " + err.Error()
	case p == nil:
		return "no progress reported"
	case err != nil:
		return fmt.Sprintf("last progress %v, then error: %v", p, err)
	}
	return fmt.Sprintf("last progress %v", p)
}

// sameConfigTag waits until every node reports the same non-empty
// configuration tag and returns it.
func (c *cluster) sameConfigTag(ctx context.Context, d time.Duration) (string, error) {
	deadline := time.Now().Add(d)
	var last []string
	for time.Now().Before(deadline) && ctx.Err() == nil {
		last = last[:0]
		tags := map[string]bool{}
		for _, n := range c.nodes {
			st, err := c.status(ctx, n)
			if err != nil {
				tags["\x00"+err.Error()] = true
				continue
			}
			last = append(last, n.Name+"="+st.ConfigTag)
			tags[st.ConfigTag] = true
		}
		if len(tags) == 1 {
			for t := range tags {
				if t != "" {
					return t, nil
				}
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return "", fmt.Errorf("nodes report configuration tags %v", last)
}
