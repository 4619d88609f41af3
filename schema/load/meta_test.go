package load

import (
	"testing"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/cuecontext"

	"github.com/writ-dev/writ/schema"
)

// TestNodeConfigDefinition: the meta-schema's #NodeConfig accepts a full
// node configuration and rejects unknown keys and bad values.
func TestNodeConfigDefinition(t *testing.T) {
	ctx := cuecontext.New()
	meta := ctx.CompileBytes(schema.Meta(), cue.Filename(schema.MetaFile))
	if err := meta.Err(); err != nil {
		t.Fatal(err)
	}
	def := meta.LookupPath(cue.ParsePath("#NodeConfig"))
	for src, ok := range map[string]bool{
		`{node: id: "n1", data_dir: "/var/lib/writ", join: ["10.0.0.2:7072"], api: addr: "127.0.0.1:7070",
		  raft: {addr: "127.0.0.1:7071", tick: "100ms", election_ticks: 10, heartbeat_ticks: 1, snapshot_entries: 10000},
		  gossip: {addr: "127.0.0.1:7072", key: ""}, pipeline: {commit_timeout: "5s", max_batch: 256},
		  membership: failed_grace: "30s", plugins: {jobs: "", paths: []}, log: {level: "info", format: "json"}}`: true,
		`{}`:                          true,
		`{colour: "red"}`:             false,
		`{raft: tick: "soon"}`:        false,
		`{log: level: "trace"}`:       false,
		`{pipeline: max_batch: 0}`:    false,
		`{api: addr: "no-port-here"}`: false,
	} {
		err := def.Unify(ctx.CompileString(src)).Validate(cue.Concrete(true))
		if (err == nil) != ok {
			t.Errorf("%s: valid=%v, want %v (%v)", src, err == nil, ok, err)
		}
	}
}
