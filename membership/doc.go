// Package membership owns cluster discovery: one serf gossip agent per node
// and a leader-only reconciler that turns what gossip reports into raft
// configuration changes.
//
// serf only reports; the raft leader acts. The caller's duties:
//
//  1. Build a Config: NodeID, BindAddr/BindPort, Seeds (gossip host:port
//     of any existing member; empty for the first node), RaftAddr,
//     APIAddr, the schema Fingerprint, Version and Role. Tags are checked
//     against serf's 512-byte limit before anything starts.
//  2. Call Start(cfg, voters). It binds gossip, joins through the seeds
//     (JoinAttempts tries, JoinRetryInterval apart) and fails with a clear
//     error when no seed answers, the gossip key is wrong or missing, or a
//     live member already uses NodeID (ErrDuplicateID).
//  3. Pass the raft node as voters (or attach it later with SetVoters).
//     Every node runs the reconciler; only the one whose voters report
//     IsLeader changes anything.
//  4. On shutdown call Leave (graceful: the leader removes this node) or
//     Shutdown (the others see a failure).
//
// The reconciler runs on every serf member event and on a periodic tick (so
// nothing is missed across leader changes) and makes at most one
// configuration change at a time, waiting for each to commit, in this order:
//
//  1. a member that left gracefully is removed;
//  2. a member that failed (or vanished from gossip) is removed once it has
//     been down for FailedGrace, measured by the current leader;
//  3. a learner whose Match is within PromoteLag of the commit index is
//     promoted to voter (role "voter", up to MaxVoters);
//  4. a new alive member with a compatible schema fingerprint is added as a
//     learner.
//
// No member is removed unless the alive voters form a majority of the
// current configuration, so a removal never leaves the remaining voters
// unable to form a majority: a 3-voter cluster that loses one node shrinks to
// 2 voters and, losing another, stays at 2. A node whose fingerprint is
// incompatible (Config.Compatible, default equality), whose tags are
// malformed, or whose raft address is taken is not admitted; Refused and View
// list it with the reason, and the refusal is logged once.
//
// Gossip is encrypted when EncryptKey or KeyringFile is set; nodes without
// the key cannot join. InstallKey, UseKey, RemoveKey and ListKeys rotate the
// key on a live cluster (install everywhere, switch, remove the old one).
//
// Timing profiles: ProfileLAN (memberlist defaults, a hard-killed node is
// declared failed after ~5–6 s) and ProfileLocal (loopback / one rack, ~1 s).
package membership
