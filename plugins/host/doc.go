// Package host owns the node side of handler plugins: it launches the
// plugin binaries named in node configuration as go-plugin gRPC processes,
// verifies them, routes entry types to them, batches evaluation (one call
// per plugin for all the items it serves), and restarts crashed plugins. It
// implements pipeline.Evaluator.
//
// Lifecycle (New):
//
//  1. Each configured binary must exist, be a regular executable file, and
//     match its configured SHA-256 (verified by go-plugin's SecureConfig
//     before the process starts).
//  2. The process is started with AutoMTLS and, on Linux, Pdeathsig=SIGKILL
//     so it dies with the node. The go-plugin handshake negotiates the wire
//     protocol version (VersionedPlugins); a plugin that prints to stdout
//     before the handshake or speaks no version this host speaks is refused.
//  3. Describe: the plugin declares its name, version, the entry types it
//     serves and the schema fingerprint it was built against. A fingerprint
//     other than the node's, a type the schema does not declare, or a
//     receipt type (receipts are never evaluated; their items are) refuses
//     the plugin.
//  4. Every declared type that needs evaluation (class request or fact) must
//     be served by exactly one loaded plugin; otherwise New fails naming the
//     type(s).
//
// Every refusal is one error naming the plugin (binary path, and its
// declared name once known) and the reason. New loads all plugins or none.
//
// Evaluation: Evaluate groups items by plugin and sends one batch per
// plugin, concurrently across plugins. A batch is packed into one message
// (pluginproto's batch codec) and sent on a long-lived Evaluate stream; each
// plugin keeps a few idle streams, one per concurrent caller, and a stream
// whose batch times out or is abandoned is canceled, never reused. Each
// plugin result is checked
// before it reaches the pipeline: a write to a key the item was not given,
// a revision precondition that differs from the given revision, a write to
// a reserved key ("_" prefix), a transition naming an undeclared machine or
// state, or a result count that does not match is an EvalInternal error for
// that item only (or for every item of the batch, for a count mismatch or
// an undecodable answer).
// Handler panics are recovered inside the plugin and arrive as EvalInternal
// for the item that panicked.
//
// Failure: a plugin whose process exits, whose connection breaks, or that
// does not answer within Config.CallTimeout is marked down. Its in-flight
// and later items get EvalUnavailable (the pipeline answers UNAVAILABLE for
// requests and keeps facts in the outbox) until a restart succeeds. Restarts
// repeat the full verification and back off exponentially from
// Config.RestartMin to Config.RestartMax. Status reports each plugin's
// health, restarts and last error.
package host
