// Package handler is the reference job-scheduler domain logic: one sdk
// handler per entry type of the jobs schema (examples/jobs/schema), over
// the generated payloads of examples/jobs/jobsgen. It is a library so that
// it can be unit-tested in process with sdktest; cmd/writ-jobs serves it as
// a go-plugin process.
//
// State is kept in JSON documents:
//
//	job/<job_id>        Job: queue, priority, command, resources, state,
//	                    assigned worker, last report, pending reason
//	queue/<queue>       Queue: name, state
//	worker/<worker_id>  Worker: capacity, labels, state, running job set,
//	                    last usage report
//
// The "state" field of each document mirrors the pipeline-owned machine
// record "_m/<machine>/<instance>" (which is authoritative and which the
// handlers never write): every handler that implies a state change writes
// the same target state into the document, and reads the machine record
// when the pipeline supplied it.
//
// Rules:
//
//   - queue.control: create a new queue (ACTIVE); pause, resume and drain an
//     existing one. Creating an existing queue or controlling a missing one
//     is refused.
//   - job.submit: the queue must exist and be ACTIVE (PAUSED and DRAINING
//     queues take no new jobs); the job ID must be new. The job starts
//     PENDING.
//   - job.control: cancel (any non-terminal job; a dispatched or running
//     job is also removed from its worker's running set), hold (PENDING
//     only) and release (HELD only).
//   - worker.join: a new worker, or a DEAD one coming back, registers as
//     READY with its capacity; a live or removed worker ID is refused.
//     worker.update changes the capacity of a live worker (a capacity
//     below the running count only stops new assignments).
//   - worker.control: drain (READY), undrain (DRAINING), remove (only with
//     no running jobs; drain first).
//   - job.assign (each item of a job.dispatch receipt): the job must be
//     PENDING, its queue not PAUSED, the worker READY with fewer running
//     jobs than its capacity. The job becomes DISPATCHED on that worker.
//   - job.state_report (fact): RUNNING / COMPLETED / FAILED with a sequence,
//     from the worker the job is dispatched to; an older or equal sequence
//     or a report about a finished job changes nothing (the pipeline's guard
//     records it as stale or opens a conflict case). A report from a worker
//     that does not hold the job is refused, naming the holder: the pipeline
//     then moves neither the document nor the machine record and
//     quarantines the report. RUNNING adds the job to the worker's running
//     set, COMPLETED and FAILED remove it.
//   - worker.usage and job.pending_reason (facts): recorded when newer than
//     the last one; a pending reason is kept only while the job waits.
//   - worker.death (fact): the worker becomes DEAD with an empty running
//     set, and every job it was running or had been dispatched is
//     REQUEUED: moved back to PENDING (through a Transition the pipeline
//     guards) with its requeue count incremented and its report sequence
//     reset for the next worker. A job that merely lost
//     its worker did not fail on its own, so it is offered to the
//     scheduler again rather than marked FAILED.
package handler
