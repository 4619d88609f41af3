package handler

import (
	"slices"

	"github.com/writ-dev/writ/plugins/sdk"
)

// Job is the document at job/<job_id>.
type Job struct {
	JobID     string `json:"job_id"`
	Queue     string `json:"queue"`
	Priority  int64  `json:"priority"`
	Command   string `json:"command"`
	CPUMillis int64  `json:"cpu_millis,omitempty"`
	MemBytes  int64  `json:"mem_bytes,omitempty"`
	// State mirrors the job machine's state.
	State string `json:"state"`
	// Worker is the worker the job is dispatched to or running on.
	Worker string `json:"worker,omitempty"`
	// Seq is the sequence of the last applied state report.
	Seq      uint64 `json:"seq,omitempty"`
	ExitCode *int64 `json:"exit_code,omitempty"`
	Message  string `json:"message,omitempty"`
	// Reason is the operator's reason for the last hold or cancel.
	Reason string `json:"reason,omitempty"`
	// PendingReason is the scheduler's latest explanation of the wait.
	PendingReason string `json:"pending_reason,omitempty"`
	ReasonSeq     uint64 `json:"reason_seq,omitempty"`
	// Requeues counts how often the job went back to PENDING because its
	// worker died.
	Requeues int `json:"requeues,omitempty"`
}

// Queue is the document at queue/<queue>.
type Queue struct {
	Name  string `json:"name"`
	State string `json:"state"`
}

// Worker is the document at worker/<worker_id>.
type Worker struct {
	WorkerID string   `json:"worker_id"`
	Capacity int64    `json:"capacity"`
	Labels   []string `json:"labels,omitempty"`
	// State mirrors the worker machine's state.
	State string `json:"state"`
	// Running holds the IDs of jobs dispatched to or running on the
	// worker, sorted.
	Running []string `json:"running"`
	Usage   *Usage   `json:"usage,omitempty"`
	// Deaths counts detected deaths; DetectedBy names the last detector.
	Deaths     int    `json:"deaths,omitempty"`
	DetectedBy string `json:"detected_by,omitempty"`
}

// Usage is a worker's last reported resource usage.
type Usage struct {
	CPUMillis int64  `json:"cpu_millis"`
	MemBytes  int64  `json:"mem_bytes"`
	Seq       uint64 `json:"seq"`
}

// Result is the document a committed request returns to its requester.
type Result struct {
	JobID    string `json:"job_id,omitempty"`
	Queue    string `json:"queue,omitempty"`
	WorkerID string `json:"worker_id,omitempty"`
	State    string `json:"state,omitempty"`
	Capacity int64  `json:"capacity,omitempty"`
	// Running is the worker's running count (worker.update only).
	Running int `json:"running,omitempty"`
}

// Job, queue and worker states.
const (
	Pending    = "PENDING"
	Held       = "HELD"
	Dispatched = "DISPATCHED"
	Running    = "RUNNING"
	Completed  = "COMPLETED"
	Failed     = "FAILED"
	Cancelled  = "CANCELLED"

	Active   = "ACTIVE"
	Paused   = "PAUSED"
	Draining = "DRAINING"

	Ready   = "READY"
	Dead    = "DEAD"
	Removed = "REMOVED"
)

func terminal(jobState string) bool {
	return jobState == Completed || jobState == Failed || jobState == Cancelled
}

func jobKey(id string) string        { return "job/" + id }
func queueKey(q string) string       { return "queue/" + q }
func workerKey(w string) string      { return "worker/" + w }
func machineKey(m, id string) string { return sdk.MachinePrefix + m + "/" + id }

// state returns the instance's authoritative state: the machine record when
// the pipeline supplied it (and the instance exists), else the document's
// mirror. It never asks for the machine record.
func state(c *sdk.Call, machine, id, mirror string) string {
	if c.Known(machineKey(machine, id)) {
		if s, _, ok := c.MachineState(machine, id); ok {
			return s
		}
	}
	return mirror
}

func (w *Worker) addRunning(job string) {
	if i, found := slices.BinarySearch(w.Running, job); !found {
		w.Running = slices.Insert(w.Running, i, job)
	}
}

func (w *Worker) removeRunning(job string) bool {
	if i, found := slices.BinarySearch(w.Running, job); found {
		w.Running = slices.Delete(w.Running, i, i+1)
		return true
	}
	return false
}
