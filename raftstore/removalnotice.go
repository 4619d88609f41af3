package raftstore

import (
	"fmt"
	"strconv"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Removal notices. A removed member normally stops when it applies its
// own removal, which needs a message carrying the removal's commit index
// to reach it. The leader keeps sending to a removed member only for
// removeGrace; a member that missed that window (its link was slow or its
// messages were dropped) would run on, refused by every peer, forever.
//
// So a node that applied a member's removal answers that member's streams
// with a notice instead of dropping them silently: the stream ends with
// FailedPrecondition and trailers naming the removed incarnation and the
// removal's index. The member stops with ErrRemoved on a notice that names
// its own incarnation; a rebuilt member under the same name (another
// incarnation) ignores a notice about its predecessor. Where either side
// knows no incarnation (a static peer, a WAL written before incarnations),
// the member stops only if it has not applied up to the removal's index:
// a member that applied past it without stopping is not the one removed.

const (
	mdRemovedInc   = "writ-removed-incarnation"
	mdRemovedIndex = "writ-removed-index"
)

// removal is what a node knows about a member it removed.
type removal struct {
	inc   uint64 // the removed incarnation; 0: not recorded
	index uint64 // the index the removal was applied at (or a snapshot covering it)
}

// removedNotice reports whether raft ID from is a member this node removed,
// and if so the notice that ends its stream.
func (t *transport) removedNotice(ss grpc.ServerStream, from uint64) (error, bool) {
	if from == 0 {
		return nil, false
	}
	t.mu.Lock()
	r, ok := t.removed[from]
	t.mu.Unlock()
	if !ok {
		return nil, false
	}
	ss.SetTrailer(metadata.Pairs(mdRemovedInc, strconv.FormatUint(r.inc, 16), mdRemovedIndex, strconv.FormatUint(r.index, 10)))
	return status.Errorf(codes.FailedPrecondition, "raftstore: member %x incarnation %016x was removed from the cluster at index %d; it must stop", from, r.inc, r.index), true
}

// readRemovedNotice returns the removal a peer's ended stream names, if
// its status and trailers are a removal notice.
func readRemovedNotice(err error, trailer metadata.MD) (removal, bool) {
	if status.Code(err) != codes.FailedPrecondition {
		return removal{}, false
	}
	incs, idxs := trailer.Get(mdRemovedInc), trailer.Get(mdRemovedIndex)
	if len(incs) != 1 || len(idxs) != 1 {
		return removal{}, false
	}
	inc, err1 := strconv.ParseUint(incs[0], 16, 64)
	idx, err2 := strconv.ParseUint(idxs[0], 10, 64)
	if err1 != nil || err2 != nil || idx == 0 {
		return removal{}, false
	}
	return removal{inc: inc, index: idx}, true
}

// removedByPeer handles a removal notice from peer: the node stops with
// ErrRemoved if the notice is about this incarnation (see above).
func (n *Node) removedByPeer(peer uint64, r removal) {
	applied := n.applied.Load()
	mine := applied < r.index
	if r.inc != 0 && n.inc != 0 {
		mine = r.inc == n.inc
	}
	if !mine {
		n.log.Debug("raftstore: a peer removed an earlier incarnation of this node; not this node's removal",
			"peer", peer, "removed_incarnation", fmt.Sprintf("%016x", r.inc), "incarnation", fmt.Sprintf("%016x", n.inc), "index", r.index, "applied", applied)
		return
	}
	n.log.Warn("raftstore: a peer says this node was removed from the cluster; stopping",
		"peer", peer, "index", r.index, "applied", applied, "incarnation", fmt.Sprintf("%016x", n.inc))
	n.failAsync(fmt.Errorf("%w (at index %d, told by peer %x)", ErrRemoved, r.index, peer))
}
