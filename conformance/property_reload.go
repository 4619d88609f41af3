package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/writ-dev/writ/pipeline"
	"github.com/writ-dev/writ/pipeline/pipelinetest"
	"github.com/writ-dev/writ/schema/ir"
)

// CodeReloadSkipped: a node answered a configuration change COMMITTED, or
// holds its activation in state, without having run the reload hook for it
// (W5): e.g. it caught up by snapshot and never reloaded.
const CodeReloadSkipped = "WRIT_RELOAD_SKIPPED"

func init() {
	register(&Check{ID: "property.reload-after-snapshot", Tier: TierProperty, Invariants: []string{"W5"},
		Title: "through the pipeline: every activation reloads the node once, in order, before its reply, also when only a restored snapshot carried it",
		Run:   checkReloadAfterSnapshot})
}

// reloadCases is the number of pipelines the check runs (each a few
// upgrades of every config type).
func reloadCases(cases int) int { return max(10, cases/1000) }

// checkReloadAfterSnapshot drives drawn configuration documents of every
// config type through a pipeline whose log commits some activations
// normally (the observer sees them) and some silently, as a node that
// installs a snapshot covering them does (the observer only hears
// Restored). After each COMMITTED reply the reload hook must already have
// run for that activation, once, with the next generation.
func checkReloadAfterSnapshot(ctx context.Context, e *Env) Outcome {
	if e.Catalog == nil || e.Schema == nil {
		return notRun("no generated catalog matches the schema")
	}
	var types []*ir.TypeDesc
	for _, td := range e.Catalog.Types() {
		if td.Class == ir.ClassConfig && td.ParseJSON != nil && td.Entry != nil {
			types = append(types, td)
		}
	}
	if len(types) == 0 {
		return notRun("the schema declares no config type")
	}
	d := newDrawer(e.Schema, e.Opts.Seed, 0x7e10ad)
	docs := map[string][][]byte{}
	for _, td := range types {
		for try := 0; try < 200 && len(docs[td.Name]) < 8; try++ {
			data, _ := json.Marshal(d.object(td.Entry.Fields))
			if _, err := td.ParseJSON(data); err == nil {
				docs[td.Name] = append(docs[td.Name], data)
			}
		}
	}
	root, err := os.MkdirTemp("", "writ-conformance-reload-")
	if err != nil {
		return notRun("temporary directory: %v", err)
	}
	defer os.RemoveAll(root)
	var c collector
	rng := rand.New(rand.NewPCG(e.Opts.Seed, 0x7e10ad))
	for k := 0; k < reloadCases(e.Opts.Cases); k++ {
		var steps []reloadStep
		for _, td := range types {
			ds := docs[td.Name]
			if len(ds) == 0 {
				continue
			}
			for i := 0; i < 3; i++ {
				// the second step of each type is always silent, the others
				// are drawn
				steps = append(steps, reloadStep{typ: td.Name, doc: ds[rng.IntN(len(ds))], silent: i == 1 || rng.IntN(2) == 0})
			}
		}
		if len(steps) == 0 {
			return notRun("no drawn configuration document of any config type was valid")
		}
		if err := e.reloadCase(ctx, &c, filepath.Join(root, "reload-"+strconv.Itoa(k)), k, steps); err != nil {
			return notRun("case %d: %v", k, err)
		}
		c.out.Cases++
	}
	return c.done()
}

type reloadStep struct {
	typ    string
	doc    []byte
	silent bool
}

func (e *Env) reloadCase(ctx context.Context, c *collector, dir string, k int, steps []reloadStep) error {
	log := pipelinetest.NewFakeLog()
	var mu sync.Mutex
	var hooks []pipeline.ConfigActivation
	p, err := pipeline.New(pipeline.Config{
		NodeID: "conformance", Catalog: e.Catalog, Log: log, Evaluator: nopEval{}, DataDir: dir,
		CommitTimeout: time.Minute, ConfigTimeout: time.Minute, TickInterval: time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		OnConfigActivated: func(a pipeline.ConfigActivation) {
			mu.Lock()
			hooks = append(hooks, a)
			mu.Unlock()
		},
	})
	if err != nil {
		return err
	}
	log.Checker, log.Observer = p.Checker(), p
	if err := p.Start(ctx); err != nil {
		return err
	}
	defer p.Stop()
	for i, st := range steps {
		id := fmt.Sprintf("c%d-%d", k, i)
		h := p.ConfigUpgradeAsync(ctx, pipeline.Entry{Type: st.typ, ID: id, Payload: st.doc})
		commit := log.CommitNext
		if st.silent {
			commit = log.CommitSilently
		}
		deadline := time.Now().Add(10 * time.Second)
	wait:
		for {
			select {
			case <-h.Done():
				break wait
			default:
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("configuration change %s (%s) got no outcome in 10s", id, st.typ)
			}
			if !commit() {
				time.Sleep(200 * time.Microsecond)
			}
		}
		o := h.Outcome()
		if o.Status != pipeline.StatusCommitted {
			return fmt.Errorf("configuration change %s (%s) answered %s", id, st.typ, o)
		}
		mu.Lock()
		got := append([]pipeline.ConfigActivation(nil), hooks...)
		mu.Unlock()
		how := "applied entry by entry"
		if st.silent {
			how = "covered by a restored snapshot"
		}
		if len(got) != i+1 || got[i].ID != id || got[i].Generation != uint64(i+1) {
			var seen []string
			for _, a := range got {
				seen = append(seen, fmt.Sprintf("%s@%d", a.ID, a.Generation))
			}
			c.add(Finding{Code: CodeReloadSkipped, Status: ir.StatusBlocked, Subject: st.typ,
				Message: fmt.Sprintf("activation %s (generation %d, %s) was answered COMMITTED but the reload hook ran for %v", id, i+1, how, seen),
				Fix:     "run Config.OnConfigActivated for every activation before its reply, including one a snapshot restore covers (Restored reads the committed tag)"})
			return nil
		}
	}
	return nil
}
