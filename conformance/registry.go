package conformance

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
)

// Tier groups checks by what they need.
type Tier string

const (
	// TierStatic checks need the schema (and the plugin for its handshake).
	TierStatic Tier = "static"
	// TierProperty checks generate cases from the schema and run them
	// through the real guards, validators and plugin.
	TierProperty Tier = "property"
	// TierCluster checks start real writd processes.
	TierCluster Tier = "cluster"
)

// Tiers lists every tier in run order.
var Tiers = []Tier{TierStatic, TierProperty, TierCluster}

// ParseTier maps a tier name to its Tier.
func ParseTier(s string) (Tier, bool) {
	for _, t := range Tiers {
		if string(t) == s {
			return t, true
		}
	}
	return "", false
}

// Invariant is one clause of the contract (DESIGN.md W1–W10).
type Invariant struct {
	ID    string `json:"id"`
	Title string `json:"title"`
}

// Invariants is the contract the suite proves; IDs are stable.
var Invariants = []Invariant{
	{"W1", "commit-first-then-reply"},
	{"W2", "requests fail truthfully"},
	{"W3", "facts are retained"},
	{"W4", "receipts confirm nothing"},
	{"W5", "configuration has its own barrier"},
	{"W6", "every type is classified"},
	{"W7", "apply is deterministic and handler-free"},
	{"W8", "transitions are guarded"},
	{"W9", "replay is idempotent"},
	{"W10", "nothing acknowledged is lost"},
}

// Outcome is what a check's Run returns. A check that could not verify its
// property sets NotRun to the reason; it must never return an empty Outcome
// for something it did not verify.
type Outcome struct {
	Findings []Finding
	NotRun   string
	Cases    int
}

// notRun is a convenience for a check that cannot run.
func notRun(format string, args ...any) Outcome {
	return Outcome{NotRun: fmt.Sprintf(format, args...)}
}

// Check is one registered conformance check.
type Check struct {
	// ID is stable: reports, docs and tests refer to it.
	ID         string
	Tier       Tier
	Invariants []string
	Title      string
	Run        func(ctx context.Context, env *Env) Outcome
}

// registry holds every check in report order.
var registry []*Check

func register(c *Check) {
	for _, x := range registry {
		if x.ID == c.ID {
			panic("conformance: duplicate check ID " + c.ID)
		}
	}
	registry = append(registry, c)
}

// Checks returns every registered check in report order (tier, then
// registration order).
func Checks() []*Check {
	out := append([]*Check(nil), registry...)
	rank := map[Tier]int{}
	for i, t := range Tiers {
		rank[t] = i
	}
	sort.SliceStable(out, func(i, j int) bool { return rank[out[i].Tier] < rank[out[j].Tier] })
	return out
}

// InvariantMap returns, for each invariant ID, the IDs of the checks that
// prove it, in report order.
func InvariantMap() map[string][]string {
	m := map[string][]string{}
	for _, c := range Checks() {
		for _, w := range c.Invariants {
			m[w] = append(m[w], c.ID)
		}
	}
	return m
}

// WriteList prints the invariant → checks map and then every check
// (`writ conformance --list`).
func WriteList(w io.Writer) error {
	var b strings.Builder
	m := InvariantMap()
	b.WriteString("invariants:\n")
	for _, inv := range Invariants {
		fmt.Fprintf(&b, "  %-4s %s\n", inv.ID, inv.Title)
		for _, id := range m[inv.ID] {
			fmt.Fprintf(&b, "         %s\n", id)
		}
	}
	b.WriteString("\nchecks:\n")
	for _, c := range Checks() {
		fmt.Fprintf(&b, "  %-34s %-8s %-9s %s\n", c.ID, c.Tier, strings.Join(c.Invariants, ","), c.Title)
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("conformance: %w", err)
	}
	return nil
}
