package robustness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/writ-dev/writ/api/writv1"
)

// clusterConfig is writ's own configuration type, present in every schema;
// every call names it: a schema with one config type of its own makes that
// one the default.
const clusterConfig = "cluster.config"

// configClient upgrades writ's own cluster settings (cluster.config), one
// change after another through a node drawn each time, until ctx ends.
// Change v carries version "v" and max_inflight 512+v (applied live by
// every node); every other setting stays what the nodes run with, so the
// changes do not alter the run's timing. Each change is one "config" op:
// COMMITTED once the node said its activation committed (ACTIVATED or
// RELOADED), FAILED when it said the change did not activate, else what
// the error said.
func (w *workload) configClient(ctx context.Context, id int, rng *rand.Rand) {
	base, err := w.configBase(ctx)
	if err != nil {
		w.h.add(Op{Client: id, Node: w.cl.nodes[0].Name, Kind: "config", Type: clusterConfig, Outcome: outError, Reason: err.Error()})
		return
	}
	for v := 1; ; v++ {
		sleepCtx(ctx, time.Duration(200+rng.IntN(600))*time.Millisecond)
		if ctx.Err() != nil {
			return
		}
		w.upgrade(ctx, id, w.cl.nodes[rng.IntN(len(w.cl.nodes))], base, v)
	}
}

// configBase is the cluster settings node 1 runs with (before any change).
func (w *workload) configBase(ctx context.Context) (map[string]any, error) {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	r, err := w.cl.nodes[0].client.ConfigShow(cctx, &writv1.ConfigShowRequest{Type: clusterConfig})
	if err != nil {
		return nil, fmt.Errorf("robustness: config show: %w", err)
	}
	var doc map[string]any
	if err := json.Unmarshal(r.Document, &doc); err != nil {
		return nil, fmt.Errorf("robustness: config show: %w", err)
	}
	if _, ok := doc["settings"].(map[string]any); !ok {
		return nil, fmt.Errorf("robustness: config show: no settings in %s", r.Document)
	}
	return doc, nil
}

// upgrade sends change v to n and records the op.
func (w *workload) upgrade(ctx context.Context, client int, n *Node, base map[string]any, v int) {
	settings := map[string]any{}
	for k, x := range base["settings"].(map[string]any) {
		settings[k] = x
	}
	settings["max_inflight"] = 512 + v
	tag := strconv.Itoa(v)
	doc, _ := json.Marshal(map[string]any{"version": tag, "settings": settings})
	op := Op{Client: client, Node: n.Name, Kind: "config", Type: clusterConfig, ID: fmt.Sprintf("%s-cfg%d", w.run, v), Payload: tag}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*w.timeout+15*time.Second)
	defer cancel()
	op.Start = w.h.now()
	last, confirmed, err := configStream(cctx, n, &writv1.ConfigUpgradeRequest{RequestId: op.ID, Document: doc, Format: "json", Type: clusterConfig})
	op.End = w.h.now()
	switch {
	case confirmed != nil:
		op.Outcome, op.Index = writv1.Outcome_COMMITTED.String(), confirmed.Index
	case last != nil && last.Phase == writv1.ConfigProgress_FAILED:
		op.Outcome, op.Index, op.Reason = outFailed, last.Index, last.Message
	case err == nil:
		op.Outcome, op.Reason = outError, "the progress stream ended without a final phase"
	default:
		op.answerErr(err)
	}
	w.h.add(op)
}

// configStream runs one ConfigUpgrade call to its end: the last progress
// message, the first one that confirmed the activation (ACTIVATED or
// RELOADED with outcome COMMITTED: committed by a majority), and the error
// that ended the stream, if any.
func configStream(ctx context.Context, n *Node, req *writv1.ConfigUpgradeRequest) (last, confirmed *writv1.ConfigProgress, err error) {
	s, err := n.client.ConfigUpgrade(ctx, req)
	if err != nil {
		return nil, nil, err
	}
	for {
		p, err := s.Recv()
		if errors.Is(err, io.EOF) {
			return last, confirmed, nil
		}
		if err != nil {
			return last, confirmed, err
		}
		last = p
		ok := p.Phase == writv1.ConfigProgress_ACTIVATED || p.Phase == writv1.ConfigProgress_RELOADED
		if ok && p.Outcome == writv1.Outcome_COMMITTED && confirmed == nil {
			confirmed = p
		}
	}
}
