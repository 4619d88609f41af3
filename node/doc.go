// Package node starts one writ node for a schema catalog and a
// configuration: what cmd/writd runs, and what a Go program calls to embed
// a node for its own schema:
//
//	cfg, err := config.Load(config.Options{File: "writd.yaml"})
//	...
//	err = node.Run(ctx, cfg, node.WithCatalog(mygen.Catalog()))
//
// The catalog is a generated one (`writ gen`) or a runtime one built from a
// schema directory (package node/schemadir, which writd --schema uses).
// Configuration loading and validation is package node/config; handler
// plugins are listed there (plugins: [{path, sha256}], --plugin
// PATH[=SHA256]) and every request and fact type of the schema must be
// served by exactly one of them. Run blocks until its context ends; Start
// returns the running *Node for callers that manage its life themselves
// (Stop keeps the node a member, Leave departs the cluster).
//
// The package holds no domain logic: it wires validated configuration →
// raftstore → plugins/host → pipeline → membership → the writ.v1 API, and
// tears it down in reverse. The adapters in adapter.go translate between
// the pipeline's Go API and the api package's consumer interfaces.
//
// Every schema has writ's own cluster settings as a config type
// (config.ClusterType): the schema's own declaration if it has one (the
// jobs schema does), otherwise a built-in one validated by node/config's
// table (configtypes.go). The built-in type is not part of the schema model
// or fingerprint.
//
// Start order and why:
//
//  1. Data directory (a fresh temporary one in dev mode) and the API
//     listener, so a port in use fails before anything touches data; the
//     raft and gossip ports are probed the same way. A schema
//     BLOCKED-incompatible with the one the data directory last ran is
//     refused here (rolling.go).
//  2. Handler plugins (a process per binary, SHA-256 verified).
//  3. Pipeline (opens and reloads the fact outbox).
//  4. raftstore with the pipeline as apply-time Checker and ApplyObserver.
//  5. membership (serf) with raftstore as its Voters; the node's API and
//     raft addresses travel as gossip tags so followers can forward to the
//     leader's API.
//  6. The gRPC server.
//
// Rolling schema upgrades (rolling.go, docs/schema.md "Rolling upgrades"):
// membership judges a node whose schema differs from the rest of the
// configuration by schema/compat (the rule of `writ schema diff`), with the
// models fetched over the Schema RPC; the API refuses an entry type some
// member's schema does not declare.
//
// Stop (SIGINT) closes everything without leaving the cluster (the node can
// restart from its data directory); Leave (SIGTERM) first announces a
// graceful departure so the leader removes it from the raft configuration.
package node
