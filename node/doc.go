// Package node wires one writd process: validated configuration →
// raftstore → plugins/host → pipeline → membership → the writ.v1 API, and
// tears it down in reverse. It holds no domain logic; the adapters in
// adapter.go translate between the pipeline's Go API and the api package's
// consumer interfaces.
//
// Start order and why:
//
//  1. Data directory (a fresh temporary one in dev mode) and the API
//     listener, so a port in use fails before anything touches data; the
//     raft and gossip ports are probed the same way.
//  2. Handler plugins (a process per binary, SHA-256 verified).
//  3. Pipeline (opens and reloads the fact outbox).
//  4. raftstore with the pipeline as apply-time Checker and ApplyObserver.
//  5. membership (serf) with raftstore as its Voters; the node's API and
//     raft addresses travel as gossip tags so followers can forward to the
//     leader's API.
//  6. The gRPC server.
//
// Stop (SIGINT) closes everything without leaving the cluster (the node can
// restart from its data directory); Leave (SIGTERM) first announces a
// graceful departure so the leader removes it from the raft configuration.
package node
