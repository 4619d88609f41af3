package api

import "fmt"

// CompactedError is a watch position older than the node retains: the
// events before First are gone from its log. It maps to gRPC OUT_OF_RANGE
// (not UNAVAILABLE: retrying the same position cannot succeed); the
// watcher re-lists the state it needs and watches from First.
type CompactedError struct {
	First uint64
}

func (e *CompactedError) Error() string {
	return fmt.Sprintf("compacted: re-list state and watch from index %d", e.First)
}
