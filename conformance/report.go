package conformance

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/writ-dev/writ/schema/ir"
)

// Result is the verdict of one check.
type Result string

const (
	// Pass: the check ran and verified its property; it has no BLOCKED or
	// INCOMPLETE finding (REVIEW_REQUIRED findings may accompany a pass).
	Pass Result = "PASS"
	// Fail: the check ran and has at least one BLOCKED or INCOMPLETE
	// finding.
	Fail Result = "FAIL"
	// NotRun: the check did not run (not selected, a prerequisite is
	// missing, or the capability it needs does not exist). NotRun is never
	// counted as passed.
	NotRun Result = "NOT_RUN"
)

// Finding is one deterministic finding of a check. Status uses the same
// values as schema findings: BLOCKED, INCOMPLETE, REVIEW_REQUIRED.
type Finding struct {
	Code    string    `json:"code"`
	Status  ir.Status `json:"status"`
	Subject string    `json:"subject,omitempty"` // type, field, machine or scenario
	Pos     string    `json:"pos,omitempty"`     // file:line:col when known
	Message string    `json:"message"`
	Fix     string    `json:"fix,omitempty"`
}

// Fails reports whether the finding makes its check fail.
func (f Finding) Fails() bool {
	return f.Status == ir.StatusBlocked || f.Status == ir.StatusIncomplete
}

func (f Finding) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s", f.Status, f.Code)
	if f.Subject != "" {
		fmt.Fprintf(&b, " %s", f.Subject)
	}
	if f.Pos != "" {
		fmt.Fprintf(&b, " (%s)", f.Pos)
	}
	fmt.Fprintf(&b, ": %s", f.Message)
	if f.Fix != "" {
		fmt.Fprintf(&b, " (fix: %s)", f.Fix)
	}
	return b.String()
}

// CheckResult is the report entry of one check.
type CheckResult struct {
	ID         string    `json:"id"`
	Tier       Tier      `json:"tier"`
	Invariants []string  `json:"invariants"`
	Title      string    `json:"title"`
	Result     Result    `json:"result"`
	Selected   bool      `json:"selected"`
	Reason     string    `json:"reason,omitempty"` // why it did not run
	Cases      int       `json:"cases,omitempty"`  // generated cases or scenarios exercised
	Findings   []Finding `json:"findings,omitempty"`
}

// Summary counts check results.
type Summary struct {
	Passed   int `json:"passed"`
	Failed   int `json:"failed"`
	NotRun   int `json:"not_run"`
	Blocked  int `json:"blocked"`
	Incompl  int `json:"incomplete"`
	Review   int `json:"review_required"`
	ExitCode int `json:"exit_code"`
}

// Report is the whole deterministic output of one suite run. It carries no
// timestamps or durations, so identical inputs give identical reports.
type Report struct {
	Schema      string        `json:"schema"`
	Fingerprint string        `json:"fingerprint,omitempty"`
	Plugin      string        `json:"plugin,omitempty"`
	Tiers       []Tier        `json:"tiers"`
	Cases       int           `json:"cases"`
	Seed        uint64        `json:"seed"`
	Checks      []CheckResult `json:"checks"`
	Summary     Summary       `json:"summary"`
}

// Check returns the result of the check with the given ID.
func (r *Report) Check(id string) (CheckResult, bool) {
	for _, c := range r.Checks {
		if c.ID == id {
			return c, true
		}
	}
	return CheckResult{}, false
}

// Exit codes of `writ conformance`.
const (
	// ExitPass: every selected check ran and passed.
	ExitPass = 0
	// ExitFail: a selected check failed (a BLOCKED or INCOMPLETE finding)
	// or could not run.
	ExitFail = 1
	// ExitUsage: the command line was wrong; nothing ran.
	ExitUsage = 2
)

// finalize sorts findings, derives each result from its findings, and
// computes the summary and exit code.
func (r *Report) finalize() {
	r.Summary = Summary{}
	for i := range r.Checks {
		c := &r.Checks[i]
		sort.SliceStable(c.Findings, func(a, b int) bool {
			fa, fb := c.Findings[a], c.Findings[b]
			if fa.Code != fb.Code {
				return fa.Code < fb.Code
			}
			if fa.Subject != fb.Subject {
				return fa.Subject < fb.Subject
			}
			return fa.Message < fb.Message
		})
		if c.Result != NotRun {
			c.Result = Pass
			for _, f := range c.Findings {
				if f.Fails() {
					c.Result = Fail
				}
			}
		}
		for _, f := range c.Findings {
			switch f.Status {
			case ir.StatusBlocked:
				r.Summary.Blocked++
			case ir.StatusIncomplete:
				r.Summary.Incompl++
			case ir.StatusReviewRequired:
				r.Summary.Review++
			}
		}
		switch c.Result {
		case Pass:
			r.Summary.Passed++
		case Fail:
			r.Summary.Failed++
		default:
			r.Summary.NotRun++
		}
		if c.Result == Fail || (c.Result == NotRun && c.Selected) {
			r.Summary.ExitCode = ExitFail
		}
	}
}

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(r); err != nil {
		return fmt.Errorf("conformance: %w", err)
	}
	return nil
}

// WriteText writes the human report: one line per check, its findings
// indented below it, and a summary line.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "writ conformance\n")
	fmt.Fprintf(&b, "schema:  %s\n", orDash(r.Schema))
	fmt.Fprintf(&b, "schema fingerprint: %s\n", orDash(r.Fingerprint))
	fmt.Fprintf(&b, "plugin:  %s\n", orDash(r.Plugin))
	tiers := make([]string, len(r.Tiers))
	for i, t := range r.Tiers {
		tiers[i] = string(t)
	}
	fmt.Fprintf(&b, "tiers:   %s (cases %d, seed %d)\n\n", strings.Join(tiers, ", "), r.Cases, r.Seed)
	idw := 0
	for _, c := range r.Checks {
		idw = max(idw, len(c.ID))
	}
	for _, c := range r.Checks {
		res := string(c.Result)
		if c.Result == NotRun {
			res = "NOT RUN"
		}
		fmt.Fprintf(&b, "%-8s %-*s  %-9s %s", res, idw, c.ID, strings.Join(c.Invariants, ","), c.Title)
		if c.Cases > 0 {
			fmt.Fprintf(&b, " [%d cases]", c.Cases)
		}
		b.WriteByte('\n')
		if c.Result == NotRun {
			fmt.Fprintf(&b, "         reason: %s\n", c.Reason)
		}
		for _, f := range c.Findings {
			fmt.Fprintf(&b, "         %s\n", f)
		}
	}
	s := r.Summary
	fmt.Fprintf(&b, "\nsummary: %d passed, %d failed, %d not run; findings: %d blocked, %d incomplete, %d review required; exit %d\n",
		s.Passed, s.Failed, s.NotRun, s.Blocked, s.Incompl, s.Review, s.ExitCode)
	_, err := io.WriteString(w, b.String())
	if err != nil {
		return fmt.Errorf("conformance: %w", err)
	}
	return nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
