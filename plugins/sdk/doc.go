// Package sdk is what a writ handler author touches: the Handler interface,
// the per-entry Call (payload, current state, and the effect being built),
// typed errors, and Serve, which turns a Plugin into a go-plugin gRPC binary
// speaking the protocol of plugins/proto.
//
// A handler is a pure function from (entry, current state of the keys it
// touches) to an effect. It never sees raft, the log or replies:
//
//  1. The host sends a batch of items; each carries the entry type, ID,
//     JSON payload and the committed value and revision of every key the
//     entry touches (absent keys have revision 0), including the
//     pipeline-owned machine-state records "_m/<machine>/<instance>".
//  2. For each item the SDK decodes and validates the payload with the
//     generated code (when Plugin.Catalog is set) and calls the Handler
//     registered for the type. A payload that does not validate is a
//     validation error for that item; the handler is not called.
//  3. The handler reads state with Call.Get / GetJSON / MachineState and
//     writes with Call.Put / PutJSON / Delete. Every write is guarded by
//     construction: its revision precondition is the revision of the key
//     in the state the handler was given (0 = must still be absent), so a
//     concurrent change makes the write a no-op at apply and the pipeline
//     re-evaluates. Handlers cannot write reserved keys (prefix "_").
//  4. Reading or writing a key that was not in the given state does not
//     guess: the item's answer becomes "need these keys" and the pipeline
//     evaluates again with them added (no callbacks into the host).
//  5. A returned *Error (Rule, Invalid) or any other error (internal)
//     becomes that item's typed error; a panic is recovered and becomes an
//     internal error for that item only; the other items of the batch are
//     unaffected.
//
// The context a handler gets is canceled when the host abandons the batch
// (its caller gave up, or the plugin did not answer within the host's call
// timeout); it carries no deadline of its own.
//
// Serve runs the process with GOMAXPROCS=1 and GOGC=400 unless those are
// set in the environment (see TuneRuntime): a call crosses the process
// boundary in a relay of goroutines, and one P avoids waking a second OS
// thread at every hand-off.
//
// Handlers must be deterministic: same input, same effect. The sdktest
// package runs a Plugin in process over exactly the code path Serve uses.
//
// The SDK pulls in no raft, serf, cue or viper, even indirectly (enforced by
// a test), and never imports the host side (plugins/host).
package sdk
