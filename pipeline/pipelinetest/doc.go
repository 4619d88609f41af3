// Package pipelinetest is a single-goroutine harness for the pipeline: an
// in-memory log with manual commit (FakeLog), a fake clock (FakeClock), a
// scriptable handler (FakeEvaluator) and a small hand-written catalog
// (FakeCatalog). Scenario scripts live in testdata/*.txt, one per invariant
// (W1–W9) at least, in the github.com/cockroachdb/datadriven format; each
// prints the stage trace of what it drives and is compared with the
// expected output kept in the script (go test -run TestScripts -rewrite
// regenerates it).
//
// Everything here is a fake by name and is meant for tests only; the
// pipeline under test is the real one, with a real outbox file.
package pipelinetest
