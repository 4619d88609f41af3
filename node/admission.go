package node

import (
	"context"

	"google.golang.org/grpc/tap"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/api/writv1"
	"github.com/writ-dev/writ/pipeline"
)

// tapAdmit refuses a Submit beyond max_inflight before the call is read or
// a handler goroutine started, so refusing stays cheap while overloaded.
// The pipeline's own admission still decides every call that passes.
func (n *Node) tapAdmit(ctx context.Context, info *tap.Info) (context.Context, error) {
	if info.FullMethodName != writv1.Writ_Submit_FullMethodName || n.pl == nil {
		return ctx, nil
	}
	if o, full := n.pl.RefuseIfFull(); full {
		return ctx, api.StatusError(&api.Error{Outcome: api.Unavailable, Reason: o.Reason})
	}
	return ctx, nil
}

// admissionOf is the status message of the pipeline's admission control.
func admissionOf(a pipeline.AdmissionStats) *writv1.Admission {
	return &writv1.Admission{
		Inflight: uint64(a.Inflight), MaxInflight: uint64(a.MaxInflight),
		OutboxEntries: uint64(a.OutboxEntries), OutboxMaxEntries: uint64(a.OutboxMaxEntries),
		OutboxBytes: uint64(max(a.OutboxBytes, 0)), OutboxMaxBytes: uint64(max(a.OutboxMaxBytes, 0)),
		RefusedRequests: a.RefusedRequests, RefusedFacts: a.RefusedFacts,
	}
}
