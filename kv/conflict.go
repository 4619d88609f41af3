package kv

import "encoding/json"

// ConflictCase is a durable record of a fact that contradicted state (W8):
// the fact was not applied, the state was preserved. One case is kept per
// machine instance, at _conflict/<machine>/<instance>; the pipeline writes
// it, clients read it as JSON. Re-observing the same
// contradiction changes nothing; a different one bumps Revision.
type ConflictCase struct {
	Machine  string `json:"machine"`
	Instance string `json:"instance"`
	EntryID  string `json:"entry_id"`
	Type     string `json:"type"`
	Current  string `json:"current"`
	Incoming string `json:"incoming"`
	Reason   string `json:"reason"`
	Revision uint64 `json:"revision"`
	Open     bool   `json:"open"`
	// Opened is when the proposer first saw the case (RFC 3339).
	Opened string `json:"opened"`
	// Payload is the incoming fact's payload (JSON): the variant that was
	// not applied, retained for the operator (and for --apply-incoming).
	Payload json.RawMessage `json:"payload,omitempty"`
	// Observations are the entries that ran into this case since it
	// opened, oldest first, at most MaxConflictObservations (the oldest
	// dropped).
	Observations []Observation `json:"observations,omitempty"`
	// Resolution is the audit record of the last resolve (nil while the
	// case was never resolved).
	Resolution *Resolution `json:"resolution,omitempty"`
}

// MaxConflictObservations bounds ConflictCase.Observations.
const MaxConflictObservations = 16

// Observation is one entry that contradicted state and was quarantined
// into a case.
type Observation struct {
	EntryID  string `json:"entry_id"`
	Type     string `json:"type"`
	Incoming string `json:"incoming"`
	At       string `json:"at"`
}

// Resolution is the audit record a resolve writes into its case: who
// resolved it, when (the proposer's clock, RFC 3339), why, and which case
// revision it closed.
type Resolution struct {
	By            string `json:"by"`
	At            string `json:"at"`
	Reason        string `json:"reason"`
	ApplyIncoming bool   `json:"apply_incoming,omitempty"`
	CaseRevision  uint64 `json:"case_revision"`
	// Applied is what apply-incoming did to state (nil without it).
	Applied *AppliedIncoming `json:"applied,omitempty"`
}

// AppliedIncoming records the transition a resolve with apply-incoming
// forced: the retained incoming fact's, from the state the instance was in
// when the case was resolved, overriding the guard (verdict override).
type AppliedIncoming struct {
	EntryID string `json:"entry_id"`
	Type    string `json:"type"`
	From    string `json:"from"`
	To      string `json:"to"`
	Verdict string `json:"verdict"`
}
