// Package jobsgen is the Go generated from the reference job-scheduler
// schema (examples/jobs/schema): a typed payload per entry type with
// Validate, a stable binary encoding and a strict JSON decoder; the
// exhaustive classification switch (Classify); the job, worker and queue
// guard tables; and Catalog(), which implements ir.Catalog. Every *_gen.go
// file is produced by `writ gen` (`make gen`) and must not be edited.
package jobsgen

//go:generate sh -c "cd ../../.. && go run ./cmd/writ gen"
