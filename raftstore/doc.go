// Package raftstore owns writ's replicated log: an etcd raft node
// (go.etcd.io/raft/v3, PreVote and CheckQuorum on, proposal forwarding from
// followers on), its durable log in etcd's wal and snap packages, a gRPC
// streaming peer transport, the applied key/value state in bbolt, and
// membership changes. It implements the pipeline's Log interface and the
// membership reconciler's voter operations; it never exports raft types.
//
// # The Ready loop
//
// raft runs with AsyncStorageWrites: the canonical duties (snapshot → WAL
// save with fsync → log storage append → send → apply → acknowledge) keep
// their order, but they are split over three goroutines so that raft never
// waits for the disk. raft is a RawNode; proposers and the transport step it
// directly under a mutex (raft.Node's own goroutine and its channel
// handoffs are not used), and every goroutine holds that mutex only to step,
// tick or take a Ready, never while it writes to disk. An error in any duty
// stops the node (see "Failure").
//
// The Ready loop, for every Ready:
//
//  1. Hands the log append message (entries, hard state, a received
//     snapshot, and the responses that must wait for them to be durable)
//     to the appender, in order.
//  2. Hands the committed entries to the applier, in order. raft releases
//     an entry for apply only once it is committed and durable in this
//     node's own log.
//  3. Sends every other message now: appends and heartbeats to followers
//     go out in parallel with the leader's own fsync (raft thesis
//     §10.2.1); they promise nothing about the leader's disk, and raft
//     counts the leader's log toward commit only once the appender reports
//     it durable (duty 8).
//  4. Answers waiting linearizable reads from the ReadStates.
//
// The appender, for every round (all append messages queued by then):
//
//  5. Saves, in message order, the entries and hard state to the WAL, and
//     a received snapshot as its file and then its WAL record (a restart
//     can always find the snapshot that the WAL refers to), with one fsync
//     for the round.
//  6. Applies the snapshot to, and appends the entries to, raft's
//     in-memory log storage, and hands a received snapshot to the applier
//     behind the entries handed to it before.
//  7. Sends the responses to peers (append and vote responses: only now,
//     because they promise durability).
//  8. Steps the responses to itself into raft (the entries are stable).
//
// The applier, for every batch of handed-over work:
//
//  9. Applies the entries and restores snapshots, in order, tells the
//     observer and the waiters (below), then steps raft's apply
//     acknowledgement, which replaces Advance.
//
// Before duties 3 and 7 send, a peer's consecutive appends of one term with
// contiguous entries are merged into one append, and its consecutive
// successful acknowledgements into the highest one (raft emits one append
// per proposal and one acknowledgement per append; the merged message
// implies the dropped ones, as if they were lost).
//
// Proposals batch on their own: while the appender waits for the disk,
// proposers keep stepping raft and the Ready loop keeps sending, so the
// next round carries all of their entries and many entries share one fsync
// (the benchmark reports entries per fsync). Because neither sending nor
// committing waits for this node's fsync, a proposal no longer waits for
// the fsync of the batch before its own, which halved the latency under
// load compared with the synchronous Ready loop.
//
// The loop calls Tick every TickInterval, also while Readys keep coming.
//
// The applier applies what duty 2 handed over into one long-lived bbolt
// write transaction, then (a) tells the kv.ApplyObserver about each applied
// entry in log order, (b) releases the Proposal waiters of entries this node
// proposed, (c) every SnapshotCount entries takes a snapshot (below), and
// (d) commits the transaction
// when it is due: every 10 ms or 4,096 entries, whichever comes first, and
// before every snapshot, state hash, restore and Stop.
//
// A snapshot is cheap because the state database is its data: the node
// commits and syncs the state, records a snapshot of metadata only (index,
// term, configuration: snap file plus WAL record), compacts the in-memory
// log to SnapshotCatchUp entries behind it and releases older WAL segments
// (a background purge keeps the newest few on disk). Only when a follower
// needs a snapshot is one built, by that peer's transport sender and off the
// Ready loop: the applied state as it stands then, named by its own applied
// index, term and configuration (kept in the state with every commit). That
// is at or past the snapshot raft chose, so the follower ends up further
// ahead, which raft accepts (etcd's server ships its backend the same way).
// Neither a snapshot's cost nor the node's memory grows with the log, and
// the cost in state size is paid only when a follower actually fell behind.
//
// A received snapshot is saved with its data (so a crash before it is
// restored can restore it at restart) and replaces the state in one
// transaction. The entries it covers are not applied one by one, so
// afterwards (a) the observer is called once with the snapshot's index and
// an empty batch, and (b) every waiting Proposal whose command IDs all have
// a StatusApplied or StatusFenced outcome in the restored table finishes
// with those outcomes (a recorded conflict or rejection may belong to an earlier
// attempt with the same ID, so such a waiter keeps waiting for its own
// entry or its deadline).
//
// # Applied state and why bbolt
//
// The state is a bbolt database (state.db): keys with their value and
// revision (the log index that last wrote them), the outcome/dedup table,
// and metadata (applied index, members). bbolt gives serializable,
// crash-safe, single-writer transactions, which is exactly the shape of
// apply: one writer, in log order, and the applied index written in the
// SAME transaction as the state it describes (W9). A crash therefore leaves
// the state at some applied index i, and replay resumes at i+1; an entry is
// never half-applied nor applied twice. It is pure Go, already used by
// etcd, needs no background compaction, and reads (serializable Get/List)
// run concurrently with the writer in MVCC read transactions. An LSM
// (pebble) would write faster but adds compaction machinery this state size
// does not need.
//
// State commits do not fsync, and they are batched (every 10 ms or 4,096
// entries): an applied entry is already durable in the WAL of a quorum, and
// the state is a deterministic function of the log. A bbolt commit costs
// about as much CPU as applying a dozen entries, so committing per apply
// batch made the applier the most expensive part of replication. What the
// open transaction holds is mirrored in an in-memory overlay (key and
// outcome → encoded value, or deleted) that Get, GetMany, List and Outcome
// consult before bbolt, under one lock with their read transaction, so a
// read sees every applied entry at one applied index; the overlay is
// cleared when the transaction commits. The state is synced before every
// snapshot (after which older WAL segments may be released and purged) and
// on Stop. A crash loses at most the uncommitted tail, which replay
// re-applies from the WAL; an apply error discards it the same way before
// the node stops. This keeps the apply path off the disk without
// weakening W9 or W10.
//
// # Apply (W7)
//
// An entry's data is a small envelope (origin node, request number) around
// the kv batch codec (kv.EncodeBatch). For every command, in order, apply
// decides, using only committed state, so every replica decides the same:
//
//  1. Duplicate: the command ID has a recorded StatusApplied outcome →
//     StatusDuplicate with FirstIndex (and the first application's Digest
//     and Verdict); nothing changes. Fenced: the ID has a recorded
//     StatusFenced outcome → StatusFenced; nothing changes. A fence
//     (kv.TypeFence) for any other ID records it as StatusFenced, for good.
//  2. Invalid command (empty key, key or ID beyond bbolt's limits) →
//     StatusRejected naming the field; Propose refuses these up front.
//  3. Checker veto: the optional kv.Checker returns an error →
//     StatusRejected with the error text; nothing changes.
//  4. Preconditions: for each conditional write the key's revision must
//     equal IfRev (0 = absent); the first that fails → StatusConflict with
//     a reason naming the key and both revisions; nothing changes.
//  5. Otherwise every write applies at the entry's index: StatusApplied.
//
// Outcomes are recorded by command ID. A non-applied outcome (conflict,
// rejected) is replaced by a later attempt with the same ID, because it
// changed nothing and the proposer re-evaluates and retries with the same
// ID. Retention is bounded by OutcomeRetention (oldest first, in log order;
// equal on every node). The table lives in bbolt, so it is part of
// snapshots and survives restarts.
//
// An entry that cannot be decoded (written by a newer version), or a
// Checker that panics, stops the node with the batch rolled back, rather
// than letting replicas diverge. So does any other failure or panic while
// applying an entry or telling the observer about it: the panic is
// recovered, the open state transaction is rolled back to its last commit,
// and Err returns an *ApplyError naming the entry's index, term, type and
// the command being applied (a fatal apply stop; writd exits 3). SkipEntry
// is the offline last resort for an entry no build can apply.
//
// The observer sees each entry once per application: normally once, but
// again if the node rebuilds a lost state.db from the log, so observers key
// their effects by log index; and not at all if it arrives in a snapshot
// (see above).
//
// # Restart and replay
//
// Start loads the newest snapshot that the WAL refers to, replays the WAL
// into raft's storage and restarts raft. If state.db is behind the snapshot
// (a snapshot was received but not restored before a crash) it is restored
// from the snapshot first; if that snapshot is a local one, which carries
// no data, state.db was lost or replaced by an older copy, and Start
// refuses with an error that names it. raft then re-delivers every committed entry after
// the snapshot: conf changes are re-applied to raft and to the member table
// even when state.db already includes them, normal entries at or below the
// applied index are skipped. Deleting state.db while no local snapshot
// exists makes the node re-apply the whole log, reaching the same state
// (TestReplay*); after a local snapshot the log no longer reaches back, so
// Start refuses (TestRestartRefusesStateBehindItsSnapshot): the node is
// rebuilt by removing it from the cluster, deleting its data directory and
// adding it again as a new member (reusing the old log without its vote
// would be unsafe), as with etcd when its backend is lost.
//
// # Waiting, reads, errors
//
// Propose returns once raft accepted the entry (a follower forwards it to
// the leader); without a known leader raft refuses it at once. Proposal.Wait
// returns the per-command results after local apply. kv.ErrNoLeader and kv.ErrDropped mean the entry was definitely not
// appended; kv.ErrUnknown means the context ended while the entry may still
// commit (ask Outcome by command ID); kv.ErrStopped means the node stopped.
// Get/List with linearizable=false read local applied state; with
// linearizable=true they first obtain a read index from the leader
// (ReadIndex, confirmed by a heartbeat quorum) and wait until it is applied;
// concurrent reads share ReadIndex rounds (readindex.go).
//
// # Failure
//
// A WAL write or fsync error, a snapshot save error or a state commit error
// is never acknowledged: the appender returns before it sends or steps any
// response that depends on the failed write, so neither peers nor raft
// learn of it (entries already handed to the applier are committed and
// durable here), the node stops, Err reports the cause, waiters get
// kv.ErrStopped, and a restart recovers from what is on disk (W10). Config
// has unexported hooks that tests use to inject a WAL failure and to drop
// messages between nodes.
//
// # Membership
//
// Node IDs are strings; RaftID maps them to raft's uint64 IDs with FNV-1a.
// A conf change carries the member's ID, raft address and incarnation in
// its context, so the member table is rebuilt by replay and shipped in
// snapshots. The incarnation (incarnation.go) tells a member rebuilt under
// its own name (new data directory, same raft ID) from its predecessor: a
// node stops with ErrRemoved only on a removal that names its own
// incarnation (or none), so a rebuilt member catching up from the log
// applies its predecessor's removal and goes on to the entry that adds it.
// A removed member that misses the entries committing its removal is told
// by its peers instead: they end its streams with a removal notice
// (removalnotice.go).
// AddLearner, Promote, Remove and TransferLeadership run on the leader, one
// conf change at a time, and return once the change is applied locally. A
// conf change first waits until raft itself has recorded as applied what
// this node applied (the applier reports back after it applied), because raft
// turns a conf change proposed while the previous one is not yet applied
// into an empty entry.
// A node starts as a fresh single-node cluster (no Peers), as one of a
// static initial configuration (Peers), or as a joiner (Join) that waits for
// the leader to add it; a joiner learns the leader's address from the
// transport stream header.
//
// # Transport
//
// Each node serves one gRPC client-streaming method with a raw-bytes codec
// and keeps one outgoing stream per peer. Outgoing messages go into a bounded
// per-peer queue (a full queue drops the message and reports the peer
// unreachable; raft retries), are batched into frames of up to MaxBatchBytes,
// and a broken stream is re-established with exponential backoff (20 ms to
// 1 s, gRPC's own connection backoff bounded alike); a peer that opens a
// stream to us (it restarted) cuts our backoff towards it short. Outgoing
// connections bind to the host of RaftAddr, so a partition between two
// addresses can be injected with packet filters.
//
// Each message is marshalled straight into its frame. The receiving side
// steps every message into raft in order, except forwarded proposals
// (MsgProp), which are stepped by a separate goroutine per stream, each with
// a short deadline, and dropped when that queue is full (as a follower
// without a leader drops them). Stepping them inline once let a restarted
// former leader stall its stream from the new leader on proposals queued for
// it before the crash (raft.Node, used then, blocked a proposal while no
// leader was known), so it never saw the heartbeats behind them and stayed
// without a leader; the node's own step no longer blocks, and the separate
// goroutine keeps the transport safe with any handler.
//
// Every received message is checked before it is queued or stepped
// (validate.go): proposals and appends must carry entries every replica can
// apply, within MaxEntryBytes; heartbeats must not commit past the durable
// log; snapshots must parse. A message that fails, an undecodable frame, or
// a raft panic on a message (recovered) ends the stream with a log line
// naming the source address. Frames over MaxFrameBytes are refused from
// their length prefix, before allocation. A snapshot larger than
// MaxBatchBytes travels in chunks, reassembled within MaxSnapshotBytes
// (snapchunk.go), so the frame cap does not bound the state. None of this authenticates the
// sender.
package raftstore
