package pipeline

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
)

// A write or fsync of the outbox file that fails leaves the file in a state
// nobody knows: the records written may be in it (the page cache keeps
// them, and a node started again reloads them), or may be lost. The outbox
// therefore fails for good at the first such error (W10): it acknowledges
// nothing more, and the node must stop and recover from disk. What a
// reporter is told follows from what may be in the file:
//
//   - a fact acknowledged before the failure is durable (its fsync
//     succeeded) and is committed after the restart;
//   - a fact whose record was written (even in part) before the failure is
//     not acknowledged but may still commit: ErrOutboxUncertain;
//   - a fact refused once the outbox had failed, or whose write transferred
//     nothing, was not written at all: ErrOutboxFailed alone.

// OutboxError is the storage failure that stopped the outbox. It matches
// ErrOutboxFailed.
type OutboxError struct {
	// Op is "write" or "fsync"; Path the file (or directory) it was on.
	Op, Path string
	Err      error
}

func (e *OutboxError) Error() string {
	return fmt.Sprintf("%v: %s %s: %v", ErrOutboxFailed, e.Op, e.Path, e.cause())
}

// cause is the file error without the path the error names already.
func (e *OutboxError) cause() error {
	var pe *fs.PathError
	if errors.As(e.Err, &pe) && pe.Path == e.Path {
		return pe.Err
	}
	return e.Err
}

// Is reports ErrOutboxFailed.
func (e *OutboxError) Is(target error) bool { return target == ErrOutboxFailed }

// Unwrap returns the file error.
func (e *OutboxError) Unwrap() error { return e.Err }

func (o *Outbox) path() string { return filepath.Join(o.dir, outboxFile) }

// failLocked records the first storage failure: every later write is
// refused, waiters are woken, Failed is closed and onFail told. A failure
// after Close changes nothing (the outbox already refuses everything).
func (o *Outbox) failLocked(op, path string, err error) {
	if o.failed != nil {
		return
	}
	e := &OutboxError{Op: op, Path: path, Err: err}
	o.failed = e
	close(o.broken)
	o.cond.Broadcast()
	if o.onFail != nil {
		o.onFail(e)
	}
}

// uncertainLocked is the error for facts whose records were written and
// never confirmed durable when the outbox failed.
func (o *Outbox) uncertainLocked() error {
	return fmt.Errorf("%w: %w", ErrOutboxUncertain, o.failed)
}

// refuseLocked answers a batch once the outbox has failed or is closed:
// nil when every item was made durable before (it is retained), the
// uncertain error when some item's record was written but never confirmed,
// and the failure itself when nothing of the batch was written.
func (o *Outbox) refuseLocked(items []OutboxItem) error {
	var written, fresh bool
	for i := range items {
		if _, ok := o.live[items[i].ID]; ok {
			continue
		}
		if _, ok := o.pending[items[i].ID]; ok {
			written = true
			continue
		}
		fresh = true
	}
	switch {
	case written:
		return o.uncertainLocked()
	case fresh:
		return o.failed
	}
	return nil
}

// Failed is closed when a write or fsync of the outbox failed (not when it
// is closed); Err then returns the *OutboxError. The node must stop and
// recover from disk (W10).
func (o *Outbox) Failed() <-chan struct{} { return o.broken }

// storageErr is the storage failure, nil while there is none.
func (o *Outbox) storageErr() *OutboxError {
	o.mu.Lock()
	defer o.mu.Unlock()
	var e *OutboxError
	if errors.As(o.failed, &e) {
		return e
	}
	return nil
}

// notifyFail sets the function told of the storage failure (once, under
// the outbox's lock: it must not call the outbox). Set it before use.
func (o *Outbox) notifyFail(f func(*OutboxError)) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.onFail = f
	var e *OutboxError
	if errors.As(o.failed, &e) && f != nil {
		f(e)
	}
}
