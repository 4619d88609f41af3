package node

import (
	"github.com/writ-dev/writ/api/writv1"
	"github.com/writ-dev/writ/pipeline"
)

// admissionOf is the status message of the pipeline's admission control.
func admissionOf(a pipeline.AdmissionStats) *writv1.Admission {
	return &writv1.Admission{
		Inflight: uint64(a.Inflight), MaxInflight: uint64(a.MaxInflight),
		OutboxEntries: uint64(a.OutboxEntries), OutboxMaxEntries: uint64(a.OutboxMaxEntries),
		OutboxBytes: uint64(max(a.OutboxBytes, 0)), OutboxMaxBytes: uint64(max(a.OutboxMaxBytes, 0)),
		RefusedRequests: a.RefusedRequests, RefusedFacts: a.RefusedFacts,
	}
}
