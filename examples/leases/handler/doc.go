// Package handler is the lease service's handler plugin: one sdk.Handler
// per evaluated entry type of examples/leases/schema, over the generated
// typed payloads of examples/leases/leasesgen. Documents are stored as
// JSON (encoding/json) at lease/<lease_id> and holder/<holder_id>; the
// pipeline-owned machine records (_m/lease/…, _m/holder/…) are read, never
// written. Handlers are pure functions of the entry and the state they are
// given.
package handler
