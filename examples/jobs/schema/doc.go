// Package schema embeds the reference job-scheduler schema: the CUE
// declarations of every log entry type the jobs controller writes, its
// class, its payload and the job, worker and queue state machines. The
// generated Go for it lives in examples/jobs/jobsgen.
package schema
