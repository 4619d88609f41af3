package node

import (
	"context"
	"encoding/json"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/pipeline"
)

var _ api.ConflictResolver = (*writer)(nil)

// ResolveConflict closes a conflict case through the pipeline and returns
// the case as this node then reads it.
func (w *writer) ResolveConflict(ctx context.Context, r api.ConflictResolution) api.ResolveResult {
	if r.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, r.Timeout)
		defer cancel()
	}
	o := w.n.pl.ResolveConflictAs(ctx, pipeline.ResolveRequest{Key: r.Key, Reason: r.Reason, By: r.By, ApplyIncoming: r.ApplyIncoming})
	out := api.ResolveResult{SubmitResult: api.SubmitResult{Outcome: toOutcome(o.Status), ID: o.ID, Index: o.Index, Reason: o.Reason, Field: o.Field}}
	if o.Status != pipeline.StatusCommitted {
		return out
	}
	if m, inst, err := pipeline.ParseConflictKey(r.Key); err == nil {
		if rec, ok, err := w.n.rs.Get(ctx, pipeline.ConflictKey(m, inst), false); err == nil && ok {
			var c pipeline.ConflictCase
			if json.Unmarshal(rec.Value, &c) == nil {
				out.Case, _ = json.Marshal(c)
			}
		}
	}
	return out
}
