// Package robustness is writ's robustness suite: it runs real clusters of
// writd processes (each with its real handler plugin processes) on
// loopback addresses, drives them with concurrent clients whose payloads
// are drawn from the schema's catalog (any schema, through
// conformance.Generator), injects faults (SIGKILL of one node, two, all
// or the fact receiver, SIGSTOP/SIGCONT, nftables partitions between node
// addresses (isolation, one-way, bridge), slow and failing fsync
// through strace attached to a node, a node replaced with a wiped data
// directory) and then checks, after
// healing, that the history every client recorded is one the contract
// allows:
//
//	(a) every COMMITTED request is committed on every node at the index
//	    its reply named, and the replicas' state hashes are equal;
//	(b) every fact acknowledged as received is committed exactly once,
//	    at one index on every node, and no outbox is left holding it;
//	(c) no request or fact answered REJECTED or UNAVAILABLE (on every
//	    attempt under its ID) is in any node's state;
//	(d) reads and writes of every machine instance key are linearizable
//	    (porcupine; a history it cannot decide counts as a failure);
//	(e) no instance leaves a terminal state and no stale order applies;
//	(f) a config change confirmed to its requester is active on every
//	    node, one reported failed on none, and no node reloads a change
//	    that did not activate (W5);
//	(W10) a node whose fsyncs fail (strace injecting EIO) stops with
//	    writd's fatal exit and answers no fact RECEIVED after the failure;
//	(g) no node log holds a panic, a fatal error or a data race, no node
//	    exited except by the nemesis, and no plugin process outlives the
//	    cluster.
//
// Every request no answer decided (UNCERTAIN, no answer) is settled after
// heal and must then have one definite outcome on every node.
//
// A run is reproduced from its seed alone: the seed draws the cluster's
// timing (tick, election ticks, snapshot interval, commit timeout), the
// fault schedule and the workload. Each run writes run.json (seed, config,
// faults, ops by outcome, checks, the reproduce command); node logs and
// data directories are kept only when a check fails. See
// docs/robustness.md.
//
// The suite sees the cluster only through writd processes, their logs and
// the client API; it never imports raftstore, membership or the node
// runtime.
package robustness
