package handler

import (
	"context"
	"fmt"

	"github.com/writ-dev/writ/examples/jobs/jobsgen"
	"github.com/writ-dev/writ/plugins/sdk"
)

// Name and Version identify the plugin.
const (
	Name    = "writ-jobs"
	Version = "0.1.0"
)

// Plugin returns the jobs handler plugin: one handler per evaluated entry
// type of the jobs schema.
func Plugin() *sdk.Plugin {
	return &sdk.Plugin{
		Name:    Name,
		Version: Version,
		Catalog: jobsgen.Catalog(),
		Handlers: map[string]sdk.Handler{
			"job.submit":         sdk.HandlerFunc(submit),
			"job.control":        sdk.HandlerFunc(jobControl),
			"queue.control":      sdk.HandlerFunc(queueControl),
			"worker.join":        sdk.HandlerFunc(workerJoin),
			"worker.update":      sdk.HandlerFunc(workerUpdate),
			"worker.control":     sdk.HandlerFunc(workerControl),
			"job.assign":         sdk.HandlerFunc(assign),
			"job.state_report":   sdk.HandlerFunc(stateReport),
			"worker.usage":       sdk.HandlerFunc(usage),
			"job.pending_reason": sdk.HandlerFunc(pendingReason),
			"worker.death":       sdk.HandlerFunc(death),
		},
	}
}

func loadJob(c *sdk.Call, id string) (*Job, bool, error) {
	return loadJobAt(c, jobKey(id), id)
}

// loadJobAt is loadJob with the document key already built.
func loadJobAt(c *sdk.Call, key, id string) (*Job, bool, error) {
	return loadDoc(c, key, "job", id, func(j *Job) *string { return &j.State })
}

func loadWorker(c *sdk.Call, id string) (*Worker, bool, error) {
	return loadDoc(c, workerKey(id), "worker", id, func(w *Worker) *string { return &w.State })
}

func loadQueue(c *sdk.Call, name string) (*Queue, bool, error) {
	return loadQueueAt(c, queueKey(name), name)
}

// loadQueueAt is loadQueue with the document key already built.
func loadQueueAt(c *sdk.Call, key, name string) (*Queue, bool, error) {
	return loadDoc(c, key, "queue", name, func(q *Queue) *string { return &q.State })
}

// loadJobAndWorker loads the job and the worker an entry names, each nil
// if it does not exist. ready is false when the handler is to return err
// at once: a read error, or a document not yet supplied (err is nil; the
// SDK asks for it and evaluates again).
func loadJobAndWorker(c *sdk.Call, jobID, workerID string) (j *Job, w *Worker, ready bool, err error) {
	j, _, err = loadJob(c, jobID)
	if err != nil {
		return nil, nil, false, err
	}
	w, _, err = loadWorker(c, workerID)
	if err != nil || !c.Known(jobKey(jobID)) || !c.Known(workerKey(workerID)) {
		return nil, nil, false, err
	}
	return j, w, true, nil
}

// reportedWorker loads the worker a fact report names. ok is false when
// the handler is to return err at once: a read error, the worker's document
// not yet supplied (err is nil; the SDK asks for it and evaluates again),
// or a worker that never joined (a rule error naming the report).
func reportedWorker(c *sdk.Call, report, reportID, id string) (w *Worker, ok bool, err error) {
	w, found, err := loadWorker(c, id)
	if err != nil || !c.Known(workerKey(id)) {
		return nil, false, err
	}
	if !found {
		return nil, false, sdk.Rule("%s %s names worker %q, which has not joined", report, reportID, id)
	}
	return w, true, nil
}

// reportedJob is reportedWorker for the job a fact report names.
func reportedJob(c *sdk.Call, report, reportID, id string) (j *Job, ok bool, err error) {
	j, found, err := loadJob(c, id)
	if err != nil || !c.Known(jobKey(id)) {
		return nil, false, err
	}
	if !found {
		return nil, false, sdk.Rule("%s %s names job %q, which does not exist", report, reportID, id)
	}
	return j, true, nil
}

// loadDoc reads the document at key (encoding/json) and sets
// the state it mirrors from the machine instance (machine, id) when the
// call declared it.
func loadDoc[T any](c *sdk.Call, key, machine, id string, stateOf func(*T) *string) (*T, bool, error) {
	b, ok := c.Get(key)
	if !ok {
		return nil, false, nil
	}
	v := new(T)
	if err := decodeDoc(key, b, v); err != nil {
		return nil, false, err
	}
	st := stateOf(v)
	*st = state(c, machine, id, *st)
	return v, true, nil
}

func submit(_ context.Context, c *sdk.Call) error {
	p, err := sdk.As[*jobsgen.JobSubmit](c)
	if err != nil {
		return err
	}
	qk, jk := queueKey(p.Queue), jobKey(p.JobID)
	q, ok, err := loadQueueAt(c, qk, p.Queue)
	if err != nil || !c.Known(qk) {
		return err
	}
	if !ok {
		return sdk.Rule("queue %q does not exist; create it with queue.control action=create", p.Queue)
	}
	if q.State != Active {
		return sdk.Rule("queue %q is %s and takes no new jobs; resume it first", p.Queue, q.State)
	}
	if _, exists, err := loadJobAt(c, jk, p.JobID); err != nil || exists {
		if err != nil {
			return err
		}
		return sdk.Rule("job %q already exists; submit with a new job_id", p.JobID)
	}
	j := Job{JobID: p.JobID, Queue: p.Queue, Priority: p.Priority, Command: p.Command, State: Pending}
	if p.CPUMillis != nil {
		j.CPUMillis = *p.CPUMillis
	}
	if p.MemBytes != nil {
		j.MemBytes = *p.MemBytes
	}
	putJob(c, jk, &j)
	return setResult(c, Result{JobID: p.JobID, State: Pending})
}

func jobControl(_ context.Context, c *sdk.Call) error {
	p, err := sdk.As[*jobsgen.JobControl](c)
	if err != nil {
		return err
	}
	j, ok, err := loadJob(c, p.JobID)
	if err != nil || !c.Known(jobKey(p.JobID)) {
		return err
	}
	if !ok {
		return sdk.Rule("job %q does not exist", p.JobID)
	}
	reason := ""
	if p.Reason != nil {
		reason = *p.Reason
	}
	switch p.Action {
	case "cancel":
		if terminal(j.State) {
			return sdk.Rule("job %q is %s; a finished job cannot be cancelled", p.JobID, j.State)
		}
		if (j.State == Dispatched || j.State == Running) && j.Worker != "" {
			w, wok, err := loadWorker(c, j.Worker)
			if err != nil {
				return err
			}
			if wok && w.removeRunning(j.JobID) {
				putWorker(c, workerKey(j.Worker), w)
			}
		}
		j.State, j.Worker, j.Reason = Cancelled, "", reason
	case "hold":
		if j.State != Pending {
			return sdk.Rule("job %q is %s; only a PENDING job can be held", p.JobID, j.State)
		}
		j.State, j.Reason = Held, reason
	case "release":
		if j.State != Held {
			return sdk.Rule("job %q is %s; only a HELD job can be released", p.JobID, j.State)
		}
		j.State, j.Reason = Pending, ""
	default:
		return sdk.Invalid("action", "unknown action %q; use cancel, hold or release", p.Action)
	}
	putJob(c, jobKey(p.JobID), j)
	return setResult(c, Result{JobID: p.JobID, State: j.State})
}

func queueControl(_ context.Context, c *sdk.Call) error {
	p, err := sdk.As[*jobsgen.QueueControl](c)
	if err != nil {
		return err
	}
	q, ok, err := loadQueue(c, p.Queue)
	if err != nil || !c.Known(queueKey(p.Queue)) {
		return err
	}
	if p.Action == "create" {
		if ok {
			return sdk.Rule("queue %q already exists (%s)", p.Queue, q.State)
		}
		q = &Queue{Name: p.Queue}
	} else if !ok {
		return sdk.Rule("queue %q does not exist; create it first", p.Queue)
	}
	var to string
	switch p.Action {
	case "create":
		to = Active
	case "pause":
		if q.State == Draining {
			return sdk.Rule("queue %q is DRAINING; resume it before pausing", p.Queue)
		}
		to = Paused
	case "resume":
		to = Active
	case "drain":
		to = Draining
	default:
		return sdk.Invalid("action", "unknown action %q; use create, pause, resume or drain", p.Action)
	}
	q.State = to
	putQueue(c, queueKey(p.Queue), q)
	return setResult(c, Result{Queue: p.Queue, State: to})
}

func workerJoin(_ context.Context, c *sdk.Call) error {
	p, err := sdk.As[*jobsgen.WorkerJoin](c)
	if err != nil {
		return err
	}
	w, ok, err := loadWorker(c, p.WorkerID)
	if err != nil || !c.Known(workerKey(p.WorkerID)) {
		return err
	}
	if ok {
		switch w.State {
		case Dead:
			// A dead worker comes back: its jobs were requeued at death.
		case Removed:
			return sdk.Rule("worker %q was removed; join under a new worker_id", p.WorkerID)
		default:
			return sdk.Rule("worker %q has already joined (%s); use worker.update to change its capacity", p.WorkerID, w.State)
		}
	} else {
		w = &Worker{WorkerID: p.WorkerID}
	}
	w.Capacity, w.Labels, w.State = p.Capacity, p.Labels, Ready
	if w.Running == nil {
		w.Running = []string{}
	}
	putWorker(c, workerKey(p.WorkerID), w)
	return setResult(c, Result{WorkerID: p.WorkerID, State: Ready, Capacity: p.Capacity})
}

func workerUpdate(_ context.Context, c *sdk.Call) error {
	p, err := sdk.As[*jobsgen.WorkerUpdate](c)
	if err != nil {
		return err
	}
	w, ok, err := loadWorker(c, p.WorkerID)
	if err != nil || !c.Known(workerKey(p.WorkerID)) {
		return err
	}
	if !ok {
		return sdk.Rule("worker %q has not joined; use worker.join", p.WorkerID)
	}
	if w.State == Removed || w.State == Dead {
		return sdk.Rule("worker %q is %s; it must join again before it can be updated", p.WorkerID, w.State)
	}
	w.Capacity = p.Capacity
	putWorker(c, workerKey(p.WorkerID), w)
	return setResult(c, Result{WorkerID: p.WorkerID, Capacity: p.Capacity, Running: len(w.Running)})
}

func workerControl(_ context.Context, c *sdk.Call) error {
	p, err := sdk.As[*jobsgen.WorkerControl](c)
	if err != nil {
		return err
	}
	w, ok, err := loadWorker(c, p.WorkerID)
	if err != nil || !c.Known(workerKey(p.WorkerID)) {
		return err
	}
	if !ok {
		return sdk.Rule("worker %q does not exist", p.WorkerID)
	}
	if w.State == Removed {
		return sdk.Rule("worker %q was removed", p.WorkerID)
	}
	switch p.Action {
	case "drain":
		if w.State != Ready {
			return sdk.Rule("worker %q is %s; only a READY worker can be drained", p.WorkerID, w.State)
		}
		w.State = Draining
	case "undrain":
		if w.State != Draining {
			return sdk.Rule("worker %q is %s; only a DRAINING worker can be undrained", p.WorkerID, w.State)
		}
		w.State = Ready
	case "remove":
		if n := len(w.Running); n > 0 {
			return sdk.Rule("worker %q still runs %d job(s) (%v); drain it and wait for them to finish", p.WorkerID, n, w.Running)
		}
		w.State = Removed
	default:
		return sdk.Invalid("action", "unknown action %q; use drain, undrain or remove", p.Action)
	}
	putWorker(c, workerKey(p.WorkerID), w)
	return setResult(c, Result{WorkerID: p.WorkerID, State: w.State})
}

func assign(_ context.Context, c *sdk.Call) error {
	p, err := sdk.As[*jobsgen.JobAssign](c)
	if err != nil {
		return err
	}
	j, w, ready, err := loadJobAndWorker(c, p.JobID, p.WorkerID)
	if !ready {
		return err
	}
	if j == nil {
		return sdk.Rule("job %q does not exist", p.JobID)
	}
	if j.State != Pending {
		return sdk.Rule("job %q is %s; only a PENDING job can be assigned", p.JobID, j.State)
	}
	if w == nil {
		return sdk.Rule("worker %q does not exist", p.WorkerID)
	}
	if w.State != Ready {
		return sdk.Rule("worker %q is %s; jobs are assigned only to READY workers", p.WorkerID, w.State)
	}
	if int64(len(w.Running)) >= w.Capacity {
		return sdk.Rule("worker %q is full: %d running, capacity %d", p.WorkerID, len(w.Running), w.Capacity)
	}
	q, qok, err := loadQueue(c, j.Queue)
	if err != nil || !c.Known(queueKey(j.Queue)) {
		return err
	}
	if qok && q.State == Paused {
		return sdk.Rule("queue %q is PAUSED; its jobs are not dispatched until it is resumed", j.Queue)
	}
	j.State, j.Worker, j.PendingReason = Dispatched, p.WorkerID, ""
	w.addRunning(p.JobID)
	putJob(c, jobKey(p.JobID), j)
	putWorker(c, workerKey(p.WorkerID), w)
	return setResult(c, Result{JobID: p.JobID, WorkerID: p.WorkerID, State: Dispatched})
}

func stateReport(_ context.Context, c *sdk.Call) error {
	p, err := sdk.As[*jobsgen.JobStateReport](c)
	if err != nil {
		return err
	}
	j, w, ready, err := loadJobAndWorker(c, p.JobID, p.WorkerID)
	if !ready {
		return err
	}
	if j == nil {
		return sdk.Rule("state report %s names job %q, which does not exist", p.ReportID, p.JobID)
	}
	if p.Seq <= j.Seq && j.Seq > 0 {
		return nil // stale or duplicate report: nothing changes
	}
	if terminal(j.State) {
		return nil // the guard quarantines a regression; the document keeps the final state
	}
	if (j.State != Dispatched && j.State != Running) || j.Worker != p.WorkerID {
		// Only the worker the job is dispatched to reports on it. A report
		// from any other worker (one the job was taken from when it died,
		// or one that never held it) is refused: the pipeline then moves
		// neither the job document nor the job's machine record, and
		// quarantines the report (a conflict case the operator sees).
		holder := "no worker"
		if j.Worker != "" {
			holder = fmt.Sprintf("worker %q", j.Worker)
		}
		return sdk.Rule("state report %s on job %q comes from worker %q, but the job is %s and held by %s; only the worker holding a job reports on it",
			p.ReportID, p.JobID, p.WorkerID, j.State, holder)
	}
	j.State, j.Seq = p.State, p.Seq
	if p.ExitCode != nil {
		j.ExitCode = p.ExitCode
	}
	if p.Message != nil {
		j.Message = *p.Message
	}
	if p.State != Running {
		j.Worker = ""
	}
	j.PendingReason = ""
	putJob(c, jobKey(p.JobID), j)
	if w == nil {
		return nil
	}
	changed := false
	if p.State == Running {
		if !contains(w.Running, p.JobID) {
			w.addRunning(p.JobID)
			changed = true
		}
	} else {
		changed = w.removeRunning(p.JobID)
	}
	if changed {
		putWorker(c, workerKey(p.WorkerID), w)
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func usage(_ context.Context, c *sdk.Call) error {
	p, err := sdk.As[*jobsgen.WorkerUsage](c)
	if err != nil {
		return err
	}
	w, ok, err := reportedWorker(c, "usage report", p.ReportID, p.WorkerID)
	if !ok {
		return err
	}
	if w.Usage != nil && p.Seq <= w.Usage.Seq {
		return nil // older report: keep the newer one
	}
	w.Usage = &Usage{CPUMillis: p.CPUMillis, MemBytes: p.MemBytes, Seq: p.Seq}
	putWorker(c, workerKey(p.WorkerID), w)
	return nil
}

func pendingReason(_ context.Context, c *sdk.Call) error {
	p, err := sdk.As[*jobsgen.JobPendingReason](c)
	if err != nil {
		return err
	}
	j, ok, err := reportedJob(c, "pending reason", p.ReportID, p.JobID)
	if !ok {
		return err
	}
	if j.State != Pending && j.State != Held {
		return nil // the job no longer waits; the reason is moot
	}
	if p.Seq <= j.ReasonSeq && j.ReasonSeq > 0 {
		return nil
	}
	j.PendingReason, j.ReasonSeq = p.Reason, p.Seq
	putJob(c, jobKey(p.JobID), j)
	return nil
}

func death(_ context.Context, c *sdk.Call) error {
	p, err := sdk.As[*jobsgen.WorkerDeath](c)
	if err != nil {
		return err
	}
	w, ok, err := reportedWorker(c, "death report", p.ReportID, p.WorkerID)
	if !ok {
		return err
	}
	if w.State == Dead || w.State == Removed {
		return nil // already dead (duplicate detection) or gone
	}
	// Read every job the worker holds first: a job not in the given state
	// makes the SDK ask for it, and the entry is evaluated again.
	jobs := make([]*Job, 0, len(w.Running))
	for _, id := range w.Running {
		j, jok, err := loadJob(c, id)
		if err != nil {
			return err
		}
		if jok {
			jobs = append(jobs, j)
		}
	}
	for _, j := range jobs {
		if terminal(j.State) || (j.State != Dispatched && j.State != Running) || j.Worker != p.WorkerID {
			continue // already finished or moved on
		}
		// The next worker numbers its reports afresh.
		j.State, j.Worker, j.Seq, j.Requeues = Pending, "", 0, j.Requeues+1
		putJob(c, jobKey(j.JobID), j)
		c.Transition("job", j.JobID, Pending)
	}
	w.State, w.Running, w.Deaths, w.DetectedBy = Dead, []string{}, w.Deaths+1, p.DetectedBy
	putWorker(c, workerKey(p.WorkerID), w)
	return nil
}
