// Package schema embeds the lease service example schema: the CUE
// declarations of every log entry type a lease/lock service writes, its
// class, its payload and the cyclic lease and holder state machines. The
// generated Go for it lives in examples/leases/leasesgen.
package schema
