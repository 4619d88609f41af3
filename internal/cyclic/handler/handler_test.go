package handler_test

import (
	"encoding/json"
	"testing"

	"github.com/writ-dev/writ/internal/cyclic/handler"
	"github.com/writ-dev/writ/internal/depcheck"
	"github.com/writ-dev/writ/plugins/sdk/sdktest"
)

func TestImportRules(t *testing.T) {
	for _, pkg := range []string{"github.com/writ-dev/writ/internal/cyclic/handler", "github.com/writ-dev/writ/internal/cyclic/cmd/writ-cyclic"} {
		depcheck.Forbid(t, pkg,
			"github.com/writ-dev/writ/plugins/host", "github.com/writ-dev/writ/pipeline",
			"github.com/writ-dev/writ/raftstore", "github.com/writ-dev/writ/membership",
			"github.com/spf13/viper", "go.etcd.io", "github.com/hashicorp/serf", "cuelang.org/go")
	}
}

func TestWatchAndProbe(t *testing.T) {
	h := sdktest.New(t, handler.Plugin())
	r := h.Eval("target.watch", "w1", `{"target":"t1","prober":"p1"}`, sdktest.Absent("target/t1"))
	if r.Err != nil {
		t.Fatalf("watch: %v", r.Err)
	}
	var doc handler.Target
	w := sdktest.DecodeWrite(t, r, "target/t1", &doc)
	if doc != (handler.Target{Target: "t1", Prober: "p1"}) || w.IfRev != 0 {
		t.Fatalf("watch wrote %+v (if rev %d)", doc, w.IfRev)
	}
	r = h.Eval("target.probe", "r1", `{"report_id":"r1","target":"t1","prober":"p1","result":"down","seq":3}`, sdktest.Doc(t, "target/t1", 4, doc))
	if r.Err != nil {
		t.Fatalf("probe: %v", r.Err)
	}
	sdktest.DecodeWrite(t, r, "target/t1", &doc)
	if doc.Result != "down" || doc.Seq != 3 {
		t.Fatalf("probe wrote %+v", doc)
	}
	r = h.Eval("target.probe", "r2", `{"report_id":"r2","target":"t2","prober":"p1","result":"up","seq":1}`, sdktest.Absent("target/t2"))
	if r.Err == nil {
		b, _ := json.Marshal(r)
		t.Fatalf("probe of an unwatched target accepted: %s", b)
	}
	// a key the call was not given is asked for, not assumed absent
	if r := h.Eval("target.watch", "w2", `{"target":"t3","prober":"p1"}`); len(r.NeedKeys) != 1 || r.NeedKeys[0] != "target/t3" {
		t.Fatalf("watch without its key: %+v", r)
	}
}
