package handler_test

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"testing"

	"pgregory.net/rapid"

	"github.com/writ-dev/writ/examples/leases/handler"
	"github.com/writ-dev/writ/examples/leases/leasesgen"
	"github.com/writ-dev/writ/plugins/sdk"
)

// drawOp draws one entry over a tiny pool of leases and holders, with
// epochs and sequences near the current ones so that fenced operations
// sometimes name the current grant and sometimes an old one.
func drawOp(t *rapid.T, w *world, step int) (string, string) {
	lease := rapid.SampledFrom([]string{"a", "b", "c"}).Draw(t, "lease")
	holder := rapid.SampledFrom([]string{"h1", "h2"}).Draw(t, "holder")
	var epoch uint64
	var l handler.Lease
	if w.doc("lease/"+lease, &l) {
		epoch = l.Epoch
	}
	epoch = uint64(max(0, int64(epoch)+int64(rapid.IntRange(-1, 1).Draw(t, "epochDelta"))))
	switch rapid.IntRange(0, 11).Draw(t, "op") {
	case 0:
		return leasesgen.NameHolderRegister, fmt.Sprintf(`{"holder_id":%q,"session_ttl_ms":5000,"max_leases":%d}`, holder, rapid.IntRange(1, 3).Draw(t, "max"))
	case 1:
		return leasesgen.NameHolderControl, fmt.Sprintf(`{"holder_id":%q,"action":"deregister"}`, holder)
	case 2:
		return leasesgen.NameLeaseControl, fmt.Sprintf(`{"lease_id":%q,"action":%q}`, lease, rapid.SampledFrom([]string{"create", "retire"}).Draw(t, "action"))
	case 3, 4:
		return leasesgen.NameLeaseAcquire, acquireJSON(lease, holder, 1000)
	case 5:
		return leasesgen.NameLeaseRelease, epochJSON(lease, holder, epoch)
	case 6:
		return leasesgen.NameLeaseRenew, epochJSON(lease, holder, epoch)
	case 7:
		return leasesgen.NameLeaseExpiry, expiryJSON(fmt.Sprintf("x%d", step), lease, holder, epoch)
	case 8:
		return leasesgen.NameHolderHeartbeat, fmt.Sprintf(`{"report_id":"hb%d","holder_id":%q,"seq":%d}`, step, holder, rapid.Uint64Range(0, 40).Draw(t, "seq"))
	case 10:
		return leasesgen.NameHolderControl, fmt.Sprintf(`{"holder_id":%q,"action":"evict"}`, holder)
	case 11:
		return leasesgen.NameHolderShutdown, fmt.Sprintf(`{"report_id":"bye%d","holder_id":%q,"seq":%d}`, step, holder, step)
	default:
		return leasesgen.NameHolderSessionLost, fmt.Sprintf(`{"report_id":"lost%d","holder_id":%q,"seq":%d,"detected_by":"s"}`, step, holder, step)
	}
}

// checkInvariants: documents mirror machine states; a HELD lease is listed
// by exactly its ACTIVE holder and no holder lists anything else; epochs
// never go back and grow by one per grant; terminal states are kept.
func checkInvariants(t *rapid.T, w *world, epochs map[string]uint64, terminal map[string]string) {
	held := map[string][]string{}
	for _, id := range []string{"a", "b", "c"} {
		var l handler.Lease
		if !w.doc("lease/"+id, &l) {
			if w.state("lease", id) != "" {
				t.Fatalf("lease %s has a machine state %s but no document", id, w.state("lease", id))
			}
			continue
		}
		if ms := w.state("lease", id); ms != l.State {
			t.Fatalf("lease %s: document says %s, machine says %s", id, l.State, ms)
		}
		if l.Epoch < epochs[id] {
			t.Fatalf("lease %s: epoch went back from %d to %d", id, epochs[id], l.Epoch)
		}
		epochs[id] = l.Epoch
		if l.State == handler.Held {
			held[l.Holder] = append(held[l.Holder], id)
			var h handler.Holder
			if !w.doc("holder/"+l.Holder, &h) || h.State != handler.Active {
				t.Fatalf("lease %s is HELD by %q, which is not an ACTIVE holder (%+v)", id, l.Holder, h)
			}
		}
		if s, ok := terminal["lease/"+id]; ok && s != l.State {
			t.Fatalf("lease %s left terminal state %s for %s", id, s, l.State)
		}
		if l.State == handler.Retired {
			terminal["lease/"+id] = l.State
		}
	}
	for _, id := range []string{"h1", "h2"} {
		var h handler.Holder
		if !w.doc("holder/"+id, &h) {
			continue
		}
		if ms := w.state("holder", id); ms != h.State {
			t.Fatalf("holder %s: document says %s, machine says %s", id, h.State, ms)
		}
		want := held[id]
		sort.Strings(want)
		if !slices.Equal(h.Held, want) && !(len(h.Held) == 0 && len(want) == 0) {
			t.Fatalf("holder %s lists %v, but holds %v", id, h.Held, want)
		}
		if int64(len(h.Held)) > h.MaxLeases {
			t.Fatalf("holder %s holds %d leases, max_leases %d", id, len(h.Held), h.MaxLeases)
		}
		if s, ok := terminal["holder/"+id]; ok && s != h.State {
			t.Fatalf("holder %s left terminal state %s for %s", id, s, h.State)
		}
		if h.State == handler.Deregistered {
			terminal["holder/"+id] = h.State
		}
	}
}

// TestRandomOperations_FakeStore runs random sequences of every evaluated
// entry type through the world and checks the domain invariants after
// every step, and that each evaluation is pure (the same item against the
// same state gives the same answer).
func TestRandomOperations_FakeStore(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		w := newWorld(t)
		epochs, terminal := map[string]uint64{}, map[string]string{}
		n := rapid.IntRange(1, 60).Draw(rt, "steps")
		for i := 0; i < n; i++ {
			typ, payload := drawOp(rt, w, i)
			before := w.s.State("lease/a", "lease/b", "lease/c", "holder/h1", "holder/h2")
			var prevEpoch uint64
			var l handler.Lease
			isAcquire := typ == leasesgen.NameLeaseAcquire
			lease := ""
			if isAcquire {
				p, _ := leasesgen.Catalog().Type(typ)
				pl, _ := p.ParseJSON([]byte(payload))
				lease = pl.InstanceKey()
				if w.doc("lease/"+lease, &l) {
					prevEpoch = l.Epoch
				}
			}
			st := w.eval(typ, payload)
			if st.res.Err != nil && st.res.Err.Kind == sdk.KindInternal {
				rt.Fatalf("step %d %s %s: internal error %v", i, typ, payload, st.res.Err)
			}
			if isAcquire && st.verdict.String() == "apply" && !st.refused {
				if got := w.lease(lease).Epoch; got != prevEpoch+1 {
					rt.Fatalf("step %d: grant of %s has epoch %d after %d", i, lease, got, prevEpoch)
				}
			}
			if st.refused || st.verdict.String() != "apply" {
				if after := w.s.State("lease/a", "lease/b", "lease/c", "holder/h1", "holder/h2"); !reflect.DeepEqual(before, after) {
					rt.Fatalf("step %d %s %s: a refused entry changed state", i, typ, payload)
				}
			}
			checkInvariants(rt, w, epochs, terminal)
		}
	})
}

// TestDeterministic evaluates every sample twice against the same state,
// alone and in one batch: the answers are identical.
func TestDeterministic(t *testing.T) {
	w := newWorld(t)
	register(w, "h1", "")
	w.ok(leasesgen.NameLeaseAcquire, acquireJSON("l1", "h1", 1000))
	keys := []string{"lease/l1", "holder/h1", "_m/lease/l1", "_m/holder/h1", "lease/l2"}
	items := []sdk.Item{
		{Type: leasesgen.NameLeaseRenew, ID: "1", Payload: []byte(epochJSON("l1", "h1", 1))},
		{Type: leasesgen.NameLeaseRelease, ID: "2", Payload: []byte(epochJSON("l1", "h1", 1))},
		{Type: leasesgen.NameLeaseExpiry, ID: "3", Payload: []byte(expiryJSON("r", "l1", "h1", 1))},
		{Type: leasesgen.NameHolderSessionLost, ID: "4", Payload: []byte(`{"report_id":"r","holder_id":"h1","seq":1,"detected_by":"s"}`)},
		{Type: leasesgen.NameLeaseAcquire, ID: "5", Payload: []byte(acquireJSON("l2", "h1", 1000))},
	}
	for i := range items {
		items[i].State = w.s.State(keys...)
	}
	p := handler.Plugin()
	a := p.Evaluate(context.Background(), items)
	b := p.Evaluate(context.Background(), items)
	for i := range items {
		if !reflect.DeepEqual(a[i], b[i]) {
			t.Errorf("%s: %+v then %+v", items[i].Type, a[i], b[i])
		}
		if a[i].Err != nil {
			t.Errorf("%s: %v", items[i].Type, a[i].Err)
		}
	}
}
