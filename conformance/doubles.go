package conformance

import (
	"github.com/writ-dev/writ/pipeline"
	"github.com/writ-dev/writ/schema/ir"
)

// doubles replace a real component with a deliberately broken one. Only the
// suite's own canary tests set them (they are unexported), to prove that
// each check can fail; a normal run always uses the real components.
type doubles struct {
	// catalog wraps the generated catalog (canary: a table missing a type).
	catalog func(ir.Catalog) ir.Catalog
	// evaluator wraps the plugin (canary: an impure handler).
	evaluator func(pipeline.Evaluator) pipeline.Evaluator
	// decide replaces pipeline.Decide (canary: a guard that lets an
	// instance leave a terminal state).
	decide decideFunc
	// replyBeforeCommit answers every request COMMITTED as soon as it is
	// proposed (canary: reply-before-commit).
	replyBeforeCommit bool
	// ackBeforeFsync acknowledges a fact before handing it to the pipeline
	// (canary: ack-fact-before-fsync).
	ackBeforeFsync bool
}

// decideFunc has the signature of pipeline.Decide.
type decideFunc func(m *ir.Machine, cur pipeline.MachineRecord, exists bool, to string, order uint64, hasOrder bool, illegal pipeline.Verdict) (pipeline.Verdict, string)

func (e *Env) decide() decideFunc {
	if e.Opts.doubles.decide != nil {
		return e.Opts.doubles.decide
	}
	return pipeline.Decide
}
