package conformance

import (
	"github.com/writ-dev/writ/pipeline"
)

// doubles replace a real component with a deliberately broken one. Only the
// suite's own tests set them (they are unexported); a normal run always uses
// the real components. The contract canaries (reply-before-commit,
// ack-fact-before-fsync, guard allowing terminal → non-terminal,
// classification table missing a type) are not doubles: they are real
// builds behind build tags, see canary_test.go.
type doubles struct {
	// evaluator wraps the plugin (an impure handler: the user's plugin is
	// the code under test, so the suite has no build of it to break).
	evaluator func(pipeline.Evaluator) pipeline.Evaluator
	// configDoc replaces each configuration document the cluster tier
	// sends (a configuration that can never activate).
	configDoc func([]byte) []byte
	// watchFails makes the fact scenarios' watch calls fail, as after
	// restarts that leave no node's stream holding the events.
	watchFails bool
}
