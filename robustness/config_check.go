package robustness

import (
	"bufio"
	"context"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/writ-dev/writ/api/writv1"
)

// configFinal is what the cluster says of the config changes after heal:
// per node, its committed configuration tag ("" when unreadable) and the
// changes its reload hook ran for (change ID → version), from its log.
type configFinal struct {
	tags    []string
	reloads []map[string]string
}

// activateID is the ID Outcome answers for the activation of change id.
func activateID(id string) string { return "cfg:" + id + ":activate" }

// configIDs are the activation IDs of the run's config changes and of
// every change a node's log says it reloaded.
func configIDs(ops []Op, fin configFinal) []string {
	seen := map[string]bool{}
	var out []string
	add := func(id string) {
		if id != "" && !seen[id] {
			seen[id] = true
			out = append(out, activateID(id))
		}
	}
	for _, op := range ops {
		if op.Kind == "config" {
			add(op.ID)
		}
	}
	for _, m := range fin.reloads {
		for id := range m {
			add(id)
		}
	}
	return out
}

// readConfigFinal asks every node for its committed tag and reads the
// reloads from its log. A node may lose its leader for a moment after heal
// on a loaded machine (ConfigShow confirms the tag with a quorum): a failed
// call is tried again, up to 8 times 0.5 s apart; a node that never
// answers has the tag "unreadable: <error>", which no change matches.
func readConfigFinal(ctx context.Context, cl *Cluster) configFinal {
	var f configFinal
	for _, n := range cl.nodes {
		var tag string
		for try := 0; try < 8; try++ {
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			r, err := n.client.ConfigShow(cctx, &writv1.ConfigShowRequest{Type: clusterConfig})
			cancel()
			if err == nil {
				tag = r.Tag
				break
			}
			tag = "unreadable: " + err.Error()
			sleepCtx(ctx, 500*time.Millisecond)
		}
		f.tags = append(f.tags, tag)
		f.reloads = append(f.reloads, reloadsIn(n.Log))
	}
	return f
}

// reloadsIn reads the "writd: configuration activated" lines of writ's own
// settings (no type attribute) from a node log: change ID → version.
func reloadsIn(log string) map[string]string {
	out := map[string]string{}
	f, err := os.Open(log)
	if err != nil {
		return out
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		l := sc.Text()
		if !strings.Contains(l, `msg="writd: configuration activated"`) || strings.Contains(l, " type=") {
			continue
		}
		if id := attr(l, "id"); id != "" {
			out[id] = attr(l, "version")
		}
	}
	return out
}

// attr is the value of key=value in a text log line ("" if absent).
func attr(line, key string) string {
	i := strings.Index(line, " "+key+"=")
	if i < 0 {
		return ""
	}
	v := line[i+len(key)+2:]
	if j := strings.IndexByte(v, ' '); j >= 0 {
		v = v[:j]
	}
	return strings.Trim(v, `"`)
}

// activated reports whether every node has the activation of a change
// applied at one index, and whether any node has.
func activated(os []nodeOutcome) (everywhere, somewhere bool) {
	everywhere = len(os) > 0
	var idx uint64
	for _, o := range os {
		ok := o.committed() && o.stat == "applied"
		somewhere = somewhere || ok
		if !ok || (idx != 0 && o.index != idx) {
			everywhere = false
		}
		idx = o.index
	}
	return everywhere, somewhere
}

// checkConfig: (f) W5. A change confirmed to its requester (the activation
// committed) is activated on every node; a change reported FAILED is
// activated on no node; no node's reload hook ran for a change that did
// not activate; every node's committed tag is the version of the last
// change that activated ("0" if none), and every node reloaded that
// change.
func checkConfig(ops []Op, outs map[string][]nodeOutcome, fin configFinal) CheckResult {
	r := CheckResult{Name: "config-activation", Pass: true}
	version := map[string]string{}
	var lastIdx uint64
	lastID, want := "", "0"
	for _, op := range ops {
		if op.Kind != "config" || op.ID == "" {
			continue
		}
		r.Cases++
		version[op.ID] = op.Payload
		os := outs[activateID(op.ID)]
		every, some := activated(os)
		switch {
		case op.Outcome == writv1.Outcome_COMMITTED.String() && !every:
			r.fail("config %s (tag %s) was confirmed activated at index %d but: %s", op.ID, op.Payload, op.Index, describe(os))
		case op.Outcome == outFailed && some:
			r.fail("config %s (tag %s) was reported FAILED (%s) but activated: %s", op.ID, op.Payload, op.Reason, describe(os))
		}
		if every && os[0].index > lastIdx {
			lastIdx, lastID, want = os[0].index, op.ID, op.Payload
		}
	}
	for i := range fin.tags {
		name := "n" + strconv.Itoa(i+1)
		var ids []string
		for id := range fin.reloads[i] {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		for _, id := range ids {
			if every, _ := activated(outs[activateID(id)]); !every {
				r.fail("%s reloaded config %s (tag %s), which did not activate: %s", name, id, fin.reloads[i][id], describe(outs[activateID(id)]))
			}
		}
		if fin.tags[i] != want {
			r.fail("%s's committed config tag is %q after heal, not %q (the last change that activated, %s)", name, fin.tags[i], want, lastID)
		}
		if _, ok := fin.reloads[i][lastID]; lastID != "" && !ok {
			r.fail("%s never reloaded config %s (tag %s), the last change that activated", name, lastID, want)
		}
	}
	return r
}
