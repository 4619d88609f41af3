package pipeline

import "github.com/writ-dev/writ/kv"

// Key latches (stage2_evaluate.go takes them). An entry latches every key
// it touches before it is evaluated, so that no other entry of this node
// is evaluated against those keys while its effect is in flight.
//
// Once the entry is appended, only the keys its command writes stay
// latched until it is applied (or fails): the next entry on such a key
// must be evaluated against committed state that holds this one's writes.
// A key it only read is released at the append. Whoever latches that key
// next is evaluated after this entry was proposed, so it is also appended
// after it: this node proposes one flush after another, and a proposal
// that may have been lost (leader change, precondition failed, timeout) is
// evaluated again before it is proposed again. The log order therefore
// stays an order in which every entry of this node saw what the entries
// before it wrote, as when every latch was held until the apply. Machine
// records are re-checked by the guard at apply on every replica in any
// case (W8).

// releaseReadLatchesLocked drops the latches of e's keys that its
// proposed command does not write. Entries on a key one request reads
// (e.g. every job.submit reads its queue) then evaluate one flush after
// another instead of one commit round trip after another.
func (p *Pipeline) releaseReadLatchesLocked(e *entry) {
	if !e.held || (e.kind != kindRequest && e.kind != kindFact) {
		return
	}
	writes := e.cmd.Effect.Writes
	for _, k := range e.keys {
		if p.latches[k] != e || (!canaryLatchReleaseWritten && writesKey(writes, k)) {
			continue
		}
		delete(p.latches, k)
	}
}

func writesKey(ws []kv.Write, k string) bool {
	for i := range ws {
		if ws[i].Key == k {
			return true
		}
	}
	return false
}
