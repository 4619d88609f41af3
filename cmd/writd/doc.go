// Command writd runs one writ node: the replicated write path over etcd
// raft, serf membership, the handler plugins and the writ.v1 gRPC API.
//
// With no configuration at all it runs a single-node dev cluster with the
// embedded jobs schema and handler (the writ-jobs plugin next to writd or on
// PATH), data in a fresh temporary directory, and prints its addresses and
// the writctl command to use. Configuration comes from a YAML or TOML file
// (--config), WRIT_* environment variables and flags, in increasing
// precedence; unknown keys and invalid values stop writd before anything
// starts, with one line naming the key and the fix.
//
// Signals: SIGTERM leaves the cluster gracefully (the leader removes the node
// from the raft configuration) and exits; SIGINT stops without leaving, so
// the node can restart from its data directory.
package main
