package runtimecat_test

import (
	"syscall"
	"testing"

	"github.com/writ-dev/writ/examples/jobs/jobsgen"
	"github.com/writ-dev/writ/schema/ir"
)

// jobSubmit is a typical job.submit request: both optional fields set.
var jobSubmit = []byte(`{"job_id":"job-000123","queue":"default","priority":500,"command":"run --input s3://bucket/key --threads 4","cpu_millis":2000,"mem_bytes":1073741824}`)

// BenchmarkParseJSONJobSubmit is JSON decode + validate of job.submit by
// the runtime catalog and by the generated one; with -count N the two
// sub-benchmarks run interleaved, so both see the same machine load.
func BenchmarkParseJSONJobSubmit(b *testing.B) {
	res := loadSchema(b, "../../examples/jobs/schema")
	rt := newRuntime(b, res.Schema)
	for _, c := range []struct {
		name string
		cat  ir.Catalog
	}{{"runtime", rt}, {"generated", jobsgen.Catalog()}} {
		d, _ := c.cat.Type("job.submit")
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(jobSubmit)))
			start := cpuTime()
			for b.Loop() {
				if _, err := d.ParseJSON(jobSubmit); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
		})
	}
}

// BenchmarkBinaryJobSubmit is the log path: ParseBinary of a committed
// entry and AppendBinary of a new one.
func BenchmarkBinaryJobSubmit(b *testing.B) {
	res := loadSchema(b, "../../examples/jobs/schema")
	rt := newRuntime(b, res.Schema)
	for _, c := range []struct {
		name string
		cat  ir.Catalog
	}{{"runtime", rt}, {"generated", jobsgen.Catalog()}} {
		d, _ := c.cat.Type("job.submit")
		p, err := d.ParseJSON(jobSubmit)
		if err != nil {
			b.Fatal(err)
		}
		bin, _ := p.AppendBinary(nil)
		buf := make([]byte, 0, 256)
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				q, err := d.ParseBinary(bin)
				if err != nil {
					b.Fatal(err)
				}
				buf, _ = q.AppendBinary(buf[:0])
			}
		})
	}
}

// cpuTime is the process's user+system CPU time in nanoseconds. Reported
// per op beside ns/op, it stays meaningful when other processes share the
// cores (wall time then includes the time spent waiting for one).
func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
