package raftstore_test

import (
	"github.com/writ-dev/writ/membership"
	"github.com/writ-dev/writ/pipeline"
	"github.com/writ-dev/writ/raftstore"
)

// The node implements the consumers' own interfaces (test-only imports:
// raftstore itself must not import them).
var (
	_ pipeline.Log             = (*raftstore.Node)(nil)
	_ membership.Voters        = (*raftstore.Node)(nil)
	_ membership.CommitIndexer = (*raftstore.Node)(nil)
)
