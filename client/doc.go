// Package client is the Go client of a writ cluster.
//
// A Client holds a list of writd API endpoints. It prefers the raft leader
// for request-shaped calls (learned from Status, or from the leader address
// a follower names when it cannot forward), sticks to an endpoint while it
// answers, and fails over to the next one when it does not.
//
// Every request gets its ID from the client before it is sent (NewRequestID:
// a millisecond clock and 80 random bits), so a call whose answer is lost
// can be retried on another endpoint with the same ID: the cluster applies
// an ID once and answers a retry with the original outcome. Submit does that by itself; what it
// cannot settle within its context comes back as an Outcome with status
// Uncertain and the request ID, to be looked up later with Client.Outcome.
//
// Outcomes are typed: Committed, Rejected, Unavailable (definitely not
// appended), Uncertain (may still commit: look the ID up) and NotCommitted
// (definitely not committed, decided after the commit timeout). A status the
// client does not know is treated like Uncertain.
//
// Watch streams committed outcomes and resumes by itself on another endpoint
// after the one it reads from fails, from the last event it delivered.
//
// Payloads are JSON. SubmitTyped, ReportTyped and DeliverTyped take a
// payload struct generated from the schema (any type with an EntryType
// method and JSON tags) and send it under its entry type name.
package client
