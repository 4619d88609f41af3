package robustness

import "time"

// checkFsync: (W10) for every fault that failed a node's fsyncs, the node
// stopped by itself with writd's fatal exit code, and no fact reported to
// it after the failure was in force was answered RECEIVED by the failing
// process (every fsync from then on failed, so nothing it received then
// was durable: such an answer acknowledged what was never fsync'd) —
// unless the fact had been answered RECEIVED before the failure began: a
// duplicate report is answered from what was made durable then. The
// cluster keeping every acknowledged write is checks (a) and (b).
func checkFsync(faults []Fault, ops []Op) CheckResult {
	r := CheckResult{Name: "fsync-error-stops", Pass: true}
	firstReceived := map[string]int64{} // fact → when its first RECEIVED answer came
	for _, op := range ops {
		if op.Kind != "report" || op.Outcome != outReceived {
			continue
		}
		if t, ok := firstReceived[outcomeID(op)]; !ok || op.End < t {
			firstReceived[outcomeID(op)] = op.End
		}
	}
	for _, f := range faults {
		rec := f.Fsync
		if rec == nil || f.Kind == SlowFsync || rec.Tampered == 0 {
			continue // nothing failed: faults-injected says so
		}
		r.Cases++
		for _, op := range ops {
			if op.Kind == "report" && op.Node == rec.Node && op.Outcome == outReceived && op.Start > rec.Attached && op.End < rec.Restarted &&
				firstReceived[outcomeID(op)] >= rec.Attached {
				r.fail("%s answered fact %s RECEIVED (call at %s–%s) while every fsync of it failed (from %s, %d failed): acknowledged without fsync",
					rec.Node, op.ID, at(op.Start), at(op.End), at(rec.Attached), rec.Tampered)
			}
		}
		switch {
		case !rec.Stopped:
			r.fail("%s kept running %s after its fsyncs failed with EIO (%d failed; %s): W10 says the node stops and recovers from disk",
				rec.Node, fsyncStopWithin, rec.Tampered, rec.Inject)
		case rec.ExitCode != writdExitFatal:
			r.fail("%s exited with code %d after its fsyncs failed, not writd's fatal storage exit %d (%s)", rec.Node, rec.ExitCode, writdExitFatal, rec.Said)
		}
	}
	return r
}

// at formats a time on the history's base.
func at(ns int64) string { return time.Duration(ns).Round(time.Millisecond).String() }
