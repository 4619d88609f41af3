// Package sim is writ's deterministic simulation of consensus and the write
// path in one process: N members, each an etcd raft RawNode
// (go.etcd.io/raft/v3) with raftstore's configuration (PreVote,
// CheckQuorum, AsyncStorageWrites, StepDownOnRemoval) driven in
// raftstore's duty order (Ready → appender: write, fsync, log storage,
// responses → applier: apply, acknowledge), with the real pipeline
// (Manual mode, simulated clock) on top, over a simulated network and a
// simulated disk.
//
// It owns the simulated world: one seeded math/rand source and one event
// queue in simulated time drive every message delay, drop, duplicate and
// delay, every fsync latency, crash (losing the writes not yet synced, or a
// prefix of them), restart from the durable state, partition (both ways
// or one way), client request and retry, and raft's own election timeout
// draws (randhook.go). A run uses no wall clock and no goroutine but its
// own, so one seed gives one history; the digest of the whole trace
// proves it (TestSimIsDeterministic).
//
// It does not run raftstore's Node: that runs three goroutines over real
// WAL, snap and bbolt files and a gRPC transport, with no seam for a
// simulated disk, network or clock. What the simulation shares with it is
// etcd raft, the raft configuration, the order of the duties, and the apply
// decisions of W7 (state.go); its storage and transport are its own.
//
// Workload: clients submit sim.put requests (one request type, a tiny
// handler: no domain's rules) with IDs, retry the same ID after an answer
// that decided nothing or none, and sometimes after COMMITTED.
//
// Checks per seed (checks.go): election safety, log matching, committed
// entries stable across nodes, crashes and restarts, ack ⇒ durable on a
// majority at the moment of the answer, acknowledged requests present on
// every node after heal at their index, NOT_COMMITTED ones absent,
// configuration and state hash agreement, convergence after heal. The
// canary_raftackbeforefsync build acknowledges before the fsync and must
// be caught (TestSimCatchesAckBeforeFsync). See docs/robustness.md,
// "Deterministic simulation".
package sim
