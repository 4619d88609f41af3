// Package api owns writ's client gRPC service, writ.v1 (generated code in
// package writv1), and the server adapter that exposes one node through it.
//
// The adapter depends only on the small interfaces defined in backend.go —
// what the API needs from the node's write path (Writer), its applied state
// (Store) and its cluster view (Info) — so it can be tested with the real
// pipeline or, in tests whose name says so, with a fake.
//
// Behaviour every caller relies on:
//
//  1. Submit replies successfully only with COMMITTED. REJECTED, UNAVAILABLE
//     and UNCERTAIN are gRPC errors (FailedPrecondition or InvalidArgument,
//     Unavailable, DeadlineExceeded) whose status carries a
//     writv1.OutcomeDetail with the outcome, the request ID and the reason;
//     use OutcomeFromError to read it.
//  2. Report acknowledges a fact only as received (fsync'd into this node's
//     outbox); facts are never forwarded, so they are retained by the node
//     the reporter talked to.
//  3. Deliver acknowledges a receipt only as received; per-item outcomes
//     arrive on Watch.
//  4. Submit, Deliver and ConfigUpgrade received by a follower are forwarded
//     to the leader's API address when it is known and reachable, at most
//     one hop; otherwise the follower processes them itself and, when that
//     is impossible, the error detail names the leader's API address.
//  5. Payloads travel as JSON or as the schema's generated binary encoding;
//     the write path decodes and validates either. A request without an ID
//     gets a generated one (returned in the reply); a fact or receipt
//     without one uses its payload's declared id field.
//  6. Server reflection is registered, so grpcurl works against any node.
//  7. Members lists each node's refusal reason (Member.refused) and every
//     refused node (MembersResponse.refused) from the optional Membership
//     backend. Keyring (list/install/use/remove a gossip key) is served by
//     the node called — gossip carries it to every node — never forwarded;
//     a malformed key is InvalidArgument naming the key and the fix, and
//     removing a key some node still encrypts with is FailedPrecondition.
//     Keys leave the node only as fingerprints (KeyFingerprint: the first
//     8 bytes of the key's SHA-256, hex), never as key material.
//  8. Write carries many Submit, Report and Deliver calls on one stream
//     (writestream.go). Each runs exactly as its unary call, through
//     Config.Intercept (authorization and audit per call), at most
//     Config.MaxStreamCalls at once. Drain, called before the gRPC server's
//     GracefulStop, makes every stream answer the calls it read and end
//     with a drained message: a call it did not answer was not processed.
package api
