package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/signal"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/api/writv1"
	"github.com/writ-dev/writ/client"
)

// factTypes are the reference domain's fact-class types: bench reports
// them instead of submitting them.
var factTypes = map[string]bool{"job.state_report": true, "worker.usage": true, "job.pending_reason": true, "worker.death": true}

// BenchResult is what `writctl bench -o json` prints.
type BenchResult struct {
	Type      string  `json:"type"`
	Kind      string  `json:"kind"`
	Clients   int     `json:"clients"`
	Ops       int     `json:"ops"`
	Size      int     `json:"payload_size"`
	Seconds   float64 `json:"seconds"`
	OpsPerSec float64 `json:"ops_per_sec"`
	P50       float64 `json:"p50_ms"`
	P90       float64 `json:"p90_ms"`
	P99       float64 `json:"p99_ms"`
	Max       float64 `json:"max_ms"`
	// MaxGap is the longest time without a successful completion.
	MaxGap   float64        `json:"max_gap_ms"`
	Outcomes map[string]int `json:"outcomes"`
	// Retried counts operations that took more than one call (--retry),
	// Resent those sent again under a new ID after NOT_COMMITTED.
	Retried int `json:"retried,omitempty"`
	Resent  int `json:"resent,omitempty"`
	// Interrupted is set when SIGINT or SIGTERM ended the run early.
	Interrupted bool `json:"interrupted,omitempty"`
}

func (a *app) benchCmd() *cobra.Command {
	var clients, ops, size int
	var typ, run, payload, class, csvFile, plotFile, getKey string
	var prepare, serializable bool
	var duration, retryFor time.Duration
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Load-generate over the API: N clients, M operations; prints ops/s, latency percentiles and outcome counts",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if clients < 1 || ops < 1 {
				return fail(exitUsage, "--clients and --ops must be at least 1")
			}
			if duration < 0 {
				return fail(exitUsage, "--duration %v: use a positive duration, or 0 to run all --ops", duration)
			}
			if size < 0 || size > 1024 {
				return fail(exitUsage, "--size %d: use 0 to 1024 bytes of padding", size)
			}
			if getKey != "" && (payload != "" || class != "auto") {
				return fail(exitUsage, "--get: reads take no --payload or --class: drop them, or drop --get to time writes")
			}
			if retryFor < 0 || (retryFor > 0 && getKey != "") {
				return fail(exitUsage, "--retry %v: give how long to keep retrying a write that has no definite answer (reads are not retried)", retryFor)
			}
			if serializable && getKey == "" {
				return fail(exitUsage, "--serializable: only reads are serializable: add --get KEY")
			}
			if payload == "" && getKey == "" && typ != "job.submit" && typ != "job.state_report" {
				return fail(exitUsage, "--type %q: without --payload bench generates job.submit (request) or job.state_report (fact); for any other type pass --payload @template.json", typ)
			}
			verb, ok := benchVerbs[class]
			if !ok {
				return fail(exitUsage, "--class %q: use auto, request, fact or receipt", class)
			}
			if run == "" {
				run = fmt.Sprintf("b%x", time.Now().UnixNano()&0xffffffff)
			}
			var tmpl *benchTemplate
			if getKey != "" {
				verb, typ = verbGet, "get"
			} else if payload != "" {
				src, err := readBenchTemplate(payload)
				if err != nil {
					return fail(exitUsage, "%v", err)
				}
				if tmpl, err = parseBenchTemplate(src, run); err != nil {
					return fail(exitUsage, "%v", err)
				}
				if n := len(tmpl.appendWith(nil, ops-1, clients-1, "0123456789abcdef")); n > api.MaxPayload {
					return fail(exitUsage, "--payload: the rendered payload is %d bytes, the limit is %d: send a smaller template", n, api.MaxPayload)
				}
				if ops > 1 && !tmpl.has(holeSeq) && !tmpl.has(holeRand) {
					fmt.Fprintln(a.errw, "writctl: bench: the payload template has no {{seq}} or {{rand}}: every operation sends the same payload (facts with one ID are received once)")
				}
			} else if class == "auto" {
				verb = verbSubmit
				if factTypes[typ] {
					verb = verbReport
				}
			}
			c, err := a.dial()
			if err != nil {
				return err
			}
			cl, _ := a.cli()
			var again, resent atomic.Int64
			var gen func(i, w int, rnd *rand.Rand) *writv1.Entry
			if verb == verbGet {
				gen = func(int, int, *rand.Rand) *writv1.Entry { return nil }
			} else if tmpl == nil {
				if err := a.benchSetup(c, typ, run, ops, clients, prepare); err != nil {
					return err
				}
				gen = jobsBenchGen(typ, run, size)
			} else {
				gen = func(i, w int, rnd *rand.Rand) *writv1.Entry {
					e := &writv1.Entry{Type: typ, Payload: tmpl.render(i, w, rnd)}
					if verb == verbSubmit {
						e.Id = client.NewRequestID()
					}
					return e
				}
			}
			tty := benchTTY(a.out) && !a.structured()
			lat := make([]time.Duration, ops)
			var mu sync.Mutex
			counts := map[string]int{}
			var next atomic.Int64
			start := time.Now()
			stats := newBenchStats(start, ops)
			probing := verb == verbAuto
			do := func(i, w int, rnd *rand.Rand, v benchVerb) (string, *writv1.OutcomeDetail) {
				e := gen(i, w, rnd)
				ctx, cancel := context.WithTimeout(context.Background(), a.timeout)
				defer cancel()
				t0 := time.Now()
				var err error
				var k0 string // an outcome other than the call's error
				switch {
				case retryFor > 0 && !probing:
					var d *writv1.OutcomeDetail
					var r retried
					k0, d, r = benchRetry(cl, v, e, retryFor, a.timeout)
					if r.again {
						again.Add(1)
					}
					resent.Add(int64(r.resent))
					if d != nil {
						err = &benchErr{d}
					}
				case v == verbReport:
					_, err = c.Report(ctx, &writv1.ReportRequest{Entry: e})
				case v == verbDeliver:
					_, err = c.Deliver(ctx, &writv1.DeliverRequest{Entry: e})
				case v == verbGet:
					var r *writv1.GetResponse
					if r, err = c.Get(ctx, &writv1.GetRequest{Key: getKey, Serializable: serializable}); err == nil && !r.GetFound() {
						k0 = "NOT_FOUND"
					}
				default:
					_, err = c.Submit(ctx, &writv1.SubmitRequest{Entry: e})
				}
				end := time.Now()
				k := v.ok()
				if k0 != "" {
					k = k0
				}
				var d *writv1.OutcomeDetail
				var be *benchErr
				if errors.As(err, &be) {
					d, k = be.d, be.d.Outcome.String()
				} else if err != nil {
					var isOutcome bool
					if d, isOutcome = api.OutcomeFromError(err); isOutcome {
						k = d.Outcome.String()
					} else {
						k = "ERROR"
					}
				}
				if probing && wrongVerb(d) {
					return k, d // the wrong verb: refused before anything was written
				}
				lat[i] = end.Sub(t0)
				stats.add(end, lat[i], k == v.ok())
				mu.Lock()
				counts[k]++
				mu.Unlock()
				return k, d
			}
			if verb == verbAuto {
				// The first operation tells the type's class: a type sent
				// with the wrong verb is refused before anything is written.
				rnd := rand.New(rand.NewPCG(uint64(start.UnixNano()), 0))
				for _, v := range []benchVerb{verbSubmit, verbReport, verbDeliver} {
					k, d := do(0, 0, rnd, v)
					if wrongVerb(d) {
						if c, _ := refusedClass(d); c == "config" {
							return fail(exitUsage, "--type %s is a config-class type: stage and activate it with writctl config upgrade --type %s --file F", typ, typ)
						}
						continue
					}
					if k != v.ok() {
						reason := "the call failed"
						if d != nil {
							reason = d.GetReason()
							if d.GetField() != "" {
								reason = d.GetField() + ": " + reason
							}
						}
						return fail(exitError, "bench: the first %s operation was %s (%s): fix --payload", typ, k, reason)
					}
					verb = v
					break
				}
				if verb == verbAuto {
					return fail(exitError, "bench: %s is neither a request, a fact nor a receipt on this cluster", typ)
				}
				next.Store(1)
				probing = false
			}
			var stop chan struct{}
			var progressDone sync.WaitGroup
			if tty {
				stop = make(chan struct{})
				progressDone.Add(1)
				go func() { defer progressDone.Done(); stats.runProgress(a.out, stop) }()
			}
			// SIGINT/SIGTERM: stop starting operations, finish those in
			// flight, and report what was done.
			var interrupted atomic.Bool
			sigs := make(chan os.Signal, 1)
			signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
			defer signal.Stop(sigs)
			go func() {
				if _, ok := <-sigs; ok {
					interrupted.Store(true)
				}
			}()
			var wg sync.WaitGroup
			for w := 0; w < clients; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					rnd := rand.New(rand.NewPCG(uint64(start.UnixNano()), uint64(w)+1))
					for {
						// the deadline is checked before an index is taken,
						// so the operations done are exactly 0..n-1
						if (duration > 0 && time.Since(start) >= duration) || interrupted.Load() {
							return
						}
						i := int(next.Add(1)) - 1
						if i >= ops {
							return
						}
						do(i, w, rnd, verb)
					}
				}()
			}
			wg.Wait()
			end := time.Now()
			el := end.Sub(start)
			if n := int(next.Load()); n < ops {
				ops, lat = n, lat[:n] // --duration ended the run first
			}
			if tty {
				close(stop)
				progressDone.Wait()
			}
			if csvFile != "" {
				if err := writeFileWith(csvFile, func(w io.Writer) error { return writeBenchCSV(w, stats.rows(el)) }); err != nil {
					return fail(exitError, "bench: --csv: %v", err)
				}
			}
			if plotFile != "" {
				if err := writeFileWith(plotFile, func(w io.Writer) error { return writeBenchSVG(w, typ, stats.rows(el), lat) }); err != nil {
					return fail(exitError, "bench: --plot: %v", err)
				}
			}
			sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
			pct := func(p float64) float64 { return percentileMs(lat, p) }
			kind := verb.kind()
			res := BenchResult{Type: typ, Kind: kind, Clients: clients, Ops: ops, Size: size, Seconds: el.Seconds(),
				OpsPerSec: float64(ops) / el.Seconds(), P50: pct(0.50), P90: pct(0.90), P99: pct(0.99), Max: pct(1), MaxGap: float64(stats.maxGap(end)) / 1e6, Outcomes: counts,
				Retried: int(again.Load()), Resent: int(resent.Load()), Interrupted: interrupted.Load()}
			if a.structured() {
				if err := a.printAny(res); err != nil {
					return err
				}
			} else {
				if verb == verbGet {
					fmt.Fprintf(a.out, "get %s (%s): %d ops, %d clients in %.2fs\n", getKey, kind, ops, clients, res.Seconds)
				} else if tmpl != nil {
					fmt.Fprintf(a.out, "%s (%s): %d ops, %d clients, payload from template in %.2fs\n", typ, kind, ops, clients, res.Seconds)
				} else {
					fmt.Fprintf(a.out, "%s (%s): %d ops, %d clients, %d-byte padding in %.2fs\n", typ, kind, ops, clients, size, res.Seconds)
				}
				fmt.Fprintf(a.out, "  throughput  %.0f ops/s\n", res.OpsPerSec)
				fmt.Fprintf(a.out, "  latency     p50 %.2fms  p90 %.2fms  p99 %.2fms  max %.2fms\n", res.P50, res.P90, res.P99, res.Max)
				fmt.Fprintf(a.out, "  longest gap %.2fms without a successful operation\n", res.MaxGap)
				if retryFor > 0 {
					fmt.Fprintf(a.out, "  retried     %d ops took more than one call, %d resent under a new ID\n", res.Retried, res.Resent)
				}
				var ks []string
				for k := range counts {
					ks = append(ks, k)
				}
				sort.Strings(ks)
				for _, k := range ks {
					fmt.Fprintf(a.out, "  %-12s %d\n", k, counts[k])
				}
			}
			if want := verb.ok(); counts[want] != ops {
				return fail(exitError, "%d of %d operations were not %s", ops-counts[want], ops, want)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVarP(&clients, "clients", "c", 1, "concurrent clients")
	f.IntVarP(&ops, "ops", "n", 1000, "total operations")
	f.StringVarP(&typ, "type", "t", "job.submit", "entry type: any request, fact or receipt type with --payload; without it job.submit (request) or job.state_report (fact)")
	f.StringVarP(&payload, "payload", "p", "", "payload template, inline JSON or @file, with {{seq}}, {{rand}}, {{client}} and {{run}} placeholders")
	f.StringVar(&class, "class", "auto", "how --type is sent: request, fact, receipt, or auto (the cluster tells)")
	f.IntVarP(&size, "size", "s", 0, "bytes of padding in the payload (command or message field) when no --payload is given")
	f.StringVar(&run, "run", "", "run name used in generated IDs and {{run}} (default: time-based)")
	f.BoolVar(&prepare, "prepare", true, "for job.state_report: first submit and dispatch the jobs the reports are about (untimed)")
	f.StringVar(&csvFile, "csv", "", "write per-second throughput and latency percentiles to this CSV file")
	f.StringVar(&plotFile, "plot", "", "write an SVG of throughput over time and the latency CDF to this file")
	f.StringVar(&getKey, "get", "", "time reads instead of writes: Get calls of this key (linearizable: confirmed with a quorum)")
	f.DurationVar(&duration, "duration", 0, "stop starting operations after this long (--ops is then an upper bound; 0: run all --ops)")
	f.BoolVar(&serializable, "serializable", false, "with --get: read the node's applied state without a quorum round")
	f.BoolVar(&a.stream, "stream", true, "send the writes on one long-lived Write stream per endpoint, many calls at once (false: one unary gRPC call each)")
	f.DurationVar(&retryFor, "retry", 0, "drive each write to a definite answer for up to this long: fail over and retry with the same ID, resend under a new ID after NOT_COMMITTED (0: one call per operation, as a raw benchmark)")
	return cmd
}

// wrongVerb reports whether d is the write path's refusal of a type sent
// with the verb of another class (nothing is written then).
func wrongVerb(d *writv1.OutcomeDetail) bool {
	_, ok := refusedClass(d)
	return ok
}

// refusedClass is the class a wrong-verb refusal names: the node says
// "T is a fact type, not a request: send it with Report …" (and the write
// path, behind it, "type is class fact: use Report").
func refusedClass(d *writv1.OutcomeDetail) (string, bool) {
	if d == nil || d.GetOutcome() != writv1.Outcome_REJECTED || d.GetField() != "type" {
		return "", false
	}
	r := d.GetReason()
	for _, c := range []string{"request", "fact", "receipt", "config"} {
		if strings.Contains(r, " is a "+c+" type, not a") || strings.Contains(r, "type is class "+c) {
			return c, true
		}
	}
	return "", false
}

// benchTTY says whether bench draws its live progress line on w.
var benchTTY = isTerminal

// benchVerb is the API call bench sends its operations with.
type benchVerb int

const (
	verbAuto benchVerb = iota
	verbSubmit
	verbReport
	verbDeliver
	verbGet
)

var benchVerbs = map[string]benchVerb{"auto": verbAuto, "request": verbSubmit, "fact": verbReport, "receipt": verbDeliver}

// ok is the outcome of a successful operation.
func (v benchVerb) ok() string {
	switch v {
	case verbSubmit:
		return "COMMITTED"
	case verbGet:
		return "FOUND"
	}
	return "RECEIVED"
}

func (v benchVerb) kind() string {
	switch v {
	case verbReport:
		return "fact"
	case verbDeliver:
		return "receipt"
	case verbGet:
		return "read"
	}
	return "request"
}

// jobsBenchGen generates the reference domain's payloads (no --payload).
func jobsBenchGen(typ, run string, size int) func(i, w int, rnd *rand.Rand) *writv1.Entry {
	pad := strings.Repeat("x", size)
	return func(i, w int, _ *rand.Rand) *writv1.Entry {
		job := fmt.Sprintf("%s-%d", run, i)
		if typ == "job.submit" {
			cmd := "run"
			if size > 0 {
				cmd = pad
			}
			return &writv1.Entry{Type: typ, Id: client.NewRequestID(), Payload: fmt.Appendf(nil, `{"job_id":%q,"queue":%q,"priority":1,"command":%q}`, job, benchQueue(run, w), cmd)}
		}
		return &writv1.Entry{Type: typ, Payload: fmt.Appendf(nil, `{"report_id":%q,"job_id":%q,"state":"RUNNING","seq":1,"worker_id":%q,"message":%q}`, "rep-"+job, job, benchWorker(run, i), pad)}
	}
}

// writeFileWith creates path and writes it with f.
func writeFileWith(path string, f func(io.Writer) error) error {
	fh, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := f(fh); err != nil {
		_ = fh.Close()
		return err
	}
	return fh.Close()
}

// maxBenchQueues bounds the queues bench spreads jobs over: every job.submit
// reads its queue, and entries touching the same key are serialised by the
// write path's latches, so one queue per client keeps clients independent.
const maxBenchQueues = 128

func benchQueue(run string, i int) string { return fmt.Sprintf("%s-q%d", run, i%maxBenchQueues) }

// jobsPerWorker is how many prepared jobs bench assigns to one worker.
const jobsPerWorker = 16

func benchWorker(run string, job int) string { return fmt.Sprintf("%s-w%d", run, job/jobsPerWorker) }

// parallel runs f(0..n-1) on up to workers goroutines and returns the
// first error.
func parallel(workers, n int, f func(int) error) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	for w := 0; w < min(workers, n); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := f(i); err != nil {
					once.Do(func() { first = err })
					return
				}
			}
		}()
	}
	wg.Wait()
	return first
}

// benchSetup creates what the generated operations refer to, untimed.
func (a *app) benchSetup(c writv1.WritClient, typ, run string, ops, clients int, prepare bool) error {
	sub := func(t, p string) error {
		ctx, cancel := context.WithTimeout(context.Background(), a.timeout)
		defer cancel()
		_, err := c.Submit(ctx, &writv1.SubmitRequest{Entry: &writv1.Entry{Type: t, Payload: []byte(p)}})
		if d, ok := api.OutcomeFromError(err); ok && d.Outcome == writv1.Outcome_REJECTED {
			return nil // already there
		}
		if err != nil {
			return a.rpcErr(err)
		}
		return nil
	}
	for q := 0; q < min(clients, maxBenchQueues); q++ {
		if err := sub("queue.control", fmt.Sprintf(`{"queue":%q,"action":"create"}`, benchQueue(run, q))); err != nil {
			return err
		}
	}
	if typ != "job.state_report" || !prepare {
		return nil
	}
	// Workers: one per jobsPerWorker jobs, so assignments to different
	// workers do not serialise on one worker key.
	nw := (ops + jobsPerWorker - 1) / jobsPerWorker
	if err := parallel(clients, nw, func(k int) error {
		return sub("worker.join", fmt.Sprintf(`{"worker_id":%q,"capacity":%d}`, benchWorker(run, k*jobsPerWorker), jobsPerWorker))
	}); err != nil {
		return fmt.Errorf("bench: preparing workers: %w", err)
	}
	if err := parallel(clients, ops, func(i int) error {
		job := fmt.Sprintf("%s-%d", run, i)
		ctx, cancel := context.WithTimeout(context.Background(), a.timeout)
		defer cancel()
		_, err := c.Submit(ctx, &writv1.SubmitRequest{Entry: &writv1.Entry{Type: "job.submit", Id: client.NewRequestID(),
			Payload: fmt.Appendf(nil, `{"job_id":%q,"queue":%q,"priority":1,"command":"run"}`, job, benchQueue(run, i%clients))}})
		if err != nil {
			return a.rpcErr(err)
		}
		return nil
	}); err != nil {
		return fmt.Errorf("bench: preparing jobs: %w", err)
	}
	// Dispatch in receipts of up to 64 items; items that did not commit
	// (receipt items report only on watch) are dispatched again.
	pending := make([]int, ops)
	for i := range pending {
		pending[i] = i
	}
	for round := 0; len(pending) > 0; round++ {
		if round == 5 {
			return fail(exitError, "bench: %d jobs did not reach DISPATCHED after %d rounds of dispatch receipts", len(pending), round)
		}
		for lo := 0; lo < len(pending); lo += 64 {
			hi := min(lo+64, len(pending))
			var items []string
			for _, i := range pending[lo:hi] {
				items = append(items, fmt.Sprintf(`{"job_id":"%s-%d","worker_id":%q}`, run, i, benchWorker(run, i)))
			}
			p := fmt.Sprintf(`{"dispatch_id":"%s-d%d-%d","scheduler":"bench","items":[%s]}`, run, round, lo, strings.Join(items, ","))
			ctx, cancel := context.WithTimeout(context.Background(), a.timeout)
			_, err := c.Deliver(ctx, &writv1.DeliverRequest{Entry: &writv1.Entry{Type: "job.dispatch", Payload: []byte(p)}})
			cancel()
			if err != nil {
				return fmt.Errorf("bench: dispatching jobs: %w", a.rpcErr(err))
			}
		}
		deadline := time.Now().Add(a.timeout)
		for {
			ctx, cancel := context.WithTimeout(context.Background(), a.timeout)
			l, err := c.List(ctx, &writv1.ListRequest{Prefix: "_m/job/" + run + "-"})
			cancel()
			if err != nil {
				return fmt.Errorf("bench: reading job states: %w", a.rpcErr(err))
			}
			dispatched := map[string]bool{}
			for _, r := range l.Records {
				if strings.Contains(string(r.Value), `"DISPATCHED"`) {
					dispatched[strings.TrimPrefix(r.Key, "_m/job/")] = true
				}
			}
			var still []int
			for _, i := range pending {
				if !dispatched[fmt.Sprintf("%s-%d", run, i)] {
					still = append(still, i)
				}
			}
			if len(still) == 0 || time.Now().After(deadline) {
				pending = still
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return nil
}
