package pipeline

import (
	"errors"
	"fmt"
)

// ErrOutboxFull: the outbox is at a bound; the facts were not accepted
// (never acknowledged, nothing written). The reporter retries later.
var ErrOutboxFull = errors.New("pipeline: outbox full")

// OutboxFullError names the bound a batch of facts would exceed.
type OutboxFullError struct {
	Entries, MaxEntries int
	Bytes, MaxBytes     int64
	// Reason is the metrics label: outbox_entries or outbox_bytes.
	Reason string
}

func (e *OutboxFullError) Error() string {
	return fmt.Sprintf("overloaded: fact outbox full (%d facts, %d bytes; bounds pipeline.outbox_max_entries %d, pipeline.outbox_max_bytes %d): not received, retry after 1s",
		e.Entries, e.Bytes, e.MaxEntries, e.MaxBytes)
}

// Is reports ErrOutboxFull.
func (e *OutboxFullError) Is(target error) bool { return target == ErrOutboxFull }

// Usage is the outbox's retained facts (also those being made durable)
// and their payload bytes.
func (o *Outbox) Usage() (entries int, bytes int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.live) + len(o.pending), o.bytes
}

// AddBatchBounded is AddBatch that first checks the bounds (0: none): when
// the new items would take the outbox beyond maxEntries facts or maxBytes
// payload bytes, nothing is written and an *OutboxFullError is returned.
// Items already retained do not count.
func (o *Outbox) AddBatchBounded(items []OutboxItem, maxEntries int, maxBytes int64) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	n, b := 0, int64(0)
	for i := range items {
		if _, ok := o.live[items[i].ID]; ok {
			continue
		}
		if _, ok := o.pending[items[i].ID]; ok {
			continue
		}
		n++
		b += int64(len(items[i].Payload))
	}
	cur := len(o.live) + len(o.pending)
	full := &OutboxFullError{Entries: cur, MaxEntries: maxEntries, Bytes: o.bytes, MaxBytes: maxBytes}
	switch {
	case n == 0:
	case maxEntries > 0 && cur+n > maxEntries:
		full.Reason = "outbox_entries"
		return full
	case maxBytes > 0 && o.bytes+b > maxBytes:
		full.Reason = "outbox_bytes"
		return full
	}
	return o.addLocked(items)
}
