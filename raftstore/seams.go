package raftstore

import (
	"net"
	"time"

	"go.etcd.io/etcd/server/v3/storage/wal/walpb"
	"go.etcd.io/raft/v3/raftpb"
)

// The node's two boundaries to the outside, as small interfaces: the peer
// transport it sends through and the durable log it writes. Production
// uses the gRPC transport (transport.go) and etcd's wal and snap packages
// on disk; the deterministic simulation (sim_*_test.go) plugs in a
// simulated network and disk through the unexported Config hooks, so the
// Ready-loop duties, apply and acknowledgement it checks are this code.

// peerNet is what the node asks of its peer transport. Received messages
// come back through raftHandler.
type peerNet interface {
	// send queues messages for their peers; it never blocks on the network.
	send(msgs []*raftpb.Message)
	setPeer(id uint64, addr string)
	removePeer(id uint64)
	// syncMembers sets the member set messages are admitted from.
	syncMembers(ids []uint64)
	close()
}

// walLog is the node's write-ahead log (etcd's wal.WAL).
type walLog interface {
	// Save writes the hard state and entries and fsyncs them when raft
	// requires it (raft.MustSync); a nil error means they are durable.
	Save(hs *raftpb.HardState, ents []*raftpb.Entry) error
	// SaveSnapshot writes and fsyncs a snapshot record.
	SaveSnapshot(s *walpb.Snapshot) error
	// ReleaseLockTo lets segments wholly before index be purged.
	ReleaseLockTo(index uint64) error
	Close() error
}

// snapStore keeps snapshot files (etcd's snap.Snapshotter); SaveSnap
// writes and fsyncs one.
type snapStore interface {
	SaveSnap(s *raftpb.Snapshot) error
}

// logDisk replaces the WAL and snapshot files on disk (simulation only).
type logDisk interface {
	// load returns the durable log: whether one was ever created, the
	// newest snapshot the WAL refers to (nil: none), the WAL's metadata,
	// hard state and entries after that snapshot, and the open WAL to
	// append to.
	load() (exists bool, snapshot *raftpb.Snapshot, meta []byte, hs *raftpb.HardState, ents []*raftpb.Entry, w walLog, err error)
	// create creates an empty WAL with metadata.
	create(meta []byte) (walLog, error)
	// remove deletes a WAL that was created but never written.
	remove() error
	snapStore
}

// simHooks replace the node's boundaries and goroutines (the deterministic
// simulation, which runs the node's rounds itself).
type simHooks struct {
	net  peerNet
	disk logDisk
	// now is the clock the state commit interval is measured with.
	now func() time.Time
}

func (c *Config) sim() *simHooks {
	if c.hooks == nil {
		return nil
	}
	return c.hooks.sim
}

// simListener stands in for the listener a simulated node does not open.
type simListener struct{}

func (simListener) Accept() (net.Conn, error) { return nil, net.ErrClosed }
func (simListener) Close() error              { return nil }
func (simListener) Addr() net.Addr            { return &net.TCPAddr{} }
