package main

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/api/writv1"
	"github.com/writ-dev/writ/internal/proctest"
)

// submitID submits a job.submit with the given request ID.
func submitID(p *proc, id, job string, timeout time.Duration) (*writv1.SubmitResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout+3*time.Second)
	defer cancel()
	return p.client.Submit(ctx, &writv1.SubmitRequest{
		Entry:     &writv1.Entry{Type: "job.submit", Id: id, Payload: []byte(fmt.Sprintf(`{"job_id":%q,"queue":"q","priority":1,"command":"x"}`, job))},
		TimeoutMs: uint32(timeout.Milliseconds())})
}

func outcomeAt(p *proc, id string, settle bool) (*writv1.OutcomeResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	return p.client.Outcome(ctx, &writv1.OutcomeRequest{RequestId: id, Settle: settle})
}

func definiteOutcome(o writv1.Outcome) bool {
	return o == writv1.Outcome_COMMITTED || o == writv1.Outcome_NOT_COMMITTED
}

// agreeOnOutcome waits until every running node answers the same
// definite outcome (and index) for id with a linearizable lookup.
func (c *cluster) agreeOnOutcome(id string, d time.Duration) *writv1.OutcomeResponse {
	c.t.Helper()
	deadline := time.Now().Add(d)
	var last []string
	for time.Now().Before(deadline) {
		last = last[:0]
		var first *writv1.OutcomeResponse
		agree := true
		for _, p := range c.nodes {
			if !p.running() {
				continue
			}
			r, err := outcomeAt(p, id, false)
			switch {
			case err != nil:
				last = append(last, p.name+": "+err.Error())
				agree = false
				continue
			case !r.Known:
				last = append(last, p.name+": unknown")
				agree = false
				continue
			}
			last = append(last, fmt.Sprintf("%s: %s@%d", p.name, r.Outcome, r.Index))
			if !definiteOutcome(r.Outcome) || (first != nil && (first.Outcome != r.Outcome || first.Index != r.Index)) {
				agree = false
			}
			if first == nil {
				first = r
			}
		}
		if agree && first != nil {
			return first
		}
		time.Sleep(100 * time.Millisecond)
	}
	c.t.Fatalf("%s: nodes did not agree on a definite outcome within %s: %v", id, d, last)
	return nil
}

// jobPresent reports on which running nodes job/<job> is in the state.
func (c *cluster) jobPresent(job string) map[string]bool {
	c.t.Helper()
	out := map[string]bool{}
	for _, p := range c.nodes {
		if !p.running() {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		r, err := p.client.Get(ctx, &writv1.GetRequest{Key: "job/" + job})
		cancel()
		if err != nil {
			c.t.Fatalf("%s: get job/%s: %v", p.name, job, err)
		}
		out[p.name] = r.Found
	}
	return out
}

// signal sends sig to p; after SIGSTOP it returns only once every thread
// of p has stopped. kill(2) returns before that, and on a loaded machine
// the process kept running for over a second: a frozen follower acked the
// leader's append, and u1 committed "with the followers frozen".
func (c *cluster) signal(p *proc, sig syscall.Signal) {
	c.t.Helper()
	if err := p.signal(sig); err != nil {
		c.t.Fatalf("%s: %v: %v", p.name, sig, err)
	}
	if sig == syscall.SIGSTOP {
		proctest.WaitStopped(c.t, p.pid())
	}
}

// uncertainAtLeader freezes both followers, submits to the leader (whose
// proposal then cannot commit) and returns once the client was answered
// UNCERTAIN; the followers stay frozen.
func (c *cluster) uncertainAtLeader(lead *proc, id, job string) {
	c.t.Helper()
	for _, p := range c.nodes {
		if p != lead {
			c.signal(p, syscall.SIGSTOP)
		}
	}
	_, err := submitID(lead, id, job, time.Second)
	d, ok := api.OutcomeFromError(err)
	if !ok || d.Outcome != writv1.Outcome_UNCERTAIN {
		c.t.Fatalf("%s with the followers frozen: want UNCERTAIN, have %v", id, err)
	}
}

// stableLeader waits until every node names the same leader in the same
// term in three polls 200ms apart, and returns that leader.
func (c *cluster) stableLeader(d time.Duration) *proc {
	c.t.Helper()
	deadline := time.Now().Add(d)
	seen, same := "", 0
	for time.Now().Before(deadline) {
		view := ""
		for _, p := range c.nodes {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			st, err := p.client.Status(ctx, &writv1.StatusRequest{})
			cancel()
			if err != nil || st.GetLeaderId() == "" {
				view = ""
				break
			}
			v := fmt.Sprintf("%s@%d", st.GetLeaderId(), st.GetTerm())
			if view != "" && v != view {
				view = ""
				break
			}
			view = v
		}
		if view != "" && view == seen {
			same++
		} else {
			seen, same = view, 0
		}
		if same >= 2 {
			lead := strings.SplitN(seen, "@", 2)[0]
			for _, p := range c.nodes {
				if p.name == lead {
					return p
				}
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	c.t.Fatalf("no leader every node agreed on for 400ms within %s (last view %q)", d, seen)
	return nil
}

func (c *cluster) thaw() {
	for _, p := range c.nodes {
		if p.running() {
			_ = p.signal(syscall.SIGCONT)
		}
	}
}

// TestOutcome_UncertainBecomesDefiniteOnEveryNode runs three real writd
// processes. (1) The followers are frozen (SIGSTOP) while the leader takes
// a request: its proposal cannot commit, the client is answered
// UNCERTAIN, and the leader fences the ID. After the followers resume,
// every node answers the same definite outcome (COMMITTED if the
// proposal won, NOT_COMMITTED if the fence did), the state agrees with it
// on every node, and a retry with the ID gets the same answer. (2) The
// leader is frozen while a follower forwards a request to it: the client
// gets no answer and no node has a record; a node asked to settle the ID
// fences it, every node answers NOT_COMMITTED, also after the leader
// resumed and handled the request late, and the job is in no state.
func TestOutcome_UncertainBecomesDefiniteOnEveryNode(t *testing.T) {
	// Elections take 5–10s (50 ticks of 100ms), far longer than u2's 1s
	// commit timeout: the attempt a follower makes after its forward to
	// the frozen leader failed has timed out (and is fenced, not proposed
	// again) before any new leader is elected. With the default 1s
	// election a loaded machine elected the new leader first, the
	// attempt was proposed again under it and committed: a right answer
	// (COMMITTED on every node), but not the fence this test is about.
	c := newClusterArgs(t, []string{"--pipeline-commit-timeout", "2s", "--raft-election-ticks", "50"}, "127.0.40.10", "127.0.40.11", "127.0.40.12")
	t.Cleanup(c.thaw) // never leave a frozen process behind
	if _, err := submit(c.nodes[0], "queue.control", `{"queue":"q","action":"create"}`, 5*time.Second); err != nil {
		t.Fatal(err)
	}

	lead := c.leader(10 * time.Second)
	c.uncertainAtLeader(lead, "u1", "ju1")
	time.Sleep(500 * time.Millisecond) // the leader's proposal waits in its log, uncommitted
	c.thaw()
	r := c.agreeOnOutcome("u1", 30*time.Second)
	t.Logf("u1: %s at index %d on every node", r.Outcome, r.Index)
	c.converge(20 * time.Second)
	present := c.jobPresent("ju1")
	for name, ok := range present {
		if ok != (r.Outcome == writv1.Outcome_COMMITTED) {
			t.Fatalf("%s: u1 is %s but job/ju1 present=%v", name, r.Outcome, ok)
		}
	}
	for _, p := range c.nodes {
		res, err := submitID(p, "u1", "ju1", 2*time.Second)
		switch r.Outcome {
		case writv1.Outcome_COMMITTED:
			if err != nil || res.Index != r.Index {
				t.Fatalf("retry of committed u1 on %s: %v %v", p.name, res, err)
			}
		default:
			if !isNotCommitted(err) {
				t.Fatalf("retry of fenced u1 on %s: want NOT_COMMITTED naming the fix, have %v", p.name, err)
			}
		}
	}

	// The leader freezes with a forwarded request unread in its socket:
	// the client's wait ends without an answer, and no node has a record.
	// A node asked to settle the ID fences it (NOT_COMMITTED); when the
	// leader resumes and handles the request late, it cannot commit.
	// The leader is frozen only once every node has named it for the same
	// term over a while: right after the thaw an election may still be
	// moving leadership, and freezing a node that already lost it leaves
	// the request to a working leader (it commits, which is no test of the
	// fence).
	lead = c.stableLeader(20 * time.Second)
	var asked *proc
	for _, p := range c.nodes {
		if p != lead {
			asked = p
			break
		}
	}
	c.signal(lead, syscall.SIGSTOP)
	_, err := submitID(asked, "u2", "ju2", time.Second)
	if st, _ := status.FromError(err); err == nil || (st.Code() != codes.DeadlineExceeded && st.Code() != codes.Aborted) {
		if d, ok := api.OutcomeFromError(err); !ok || d.Outcome != writv1.Outcome_UNCERTAIN {
			t.Fatalf("u2 forwarded to a frozen leader: want no answer (UNCERTAIN), have %v", err)
		}
	}
	var settled *writv1.OutcomeResponse
	// a new leader must be elected (5–10s) before the fence commits
	deadline := time.Now().Add(45 * time.Second)
	for {
		o, err := outcomeAt(asked, "u2", true)
		if err == nil && o.Known && definiteOutcome(o.Outcome) {
			settled = o
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("settle u2 on %s: no definite outcome within 45s (last: %v, err %v)", asked.name, o, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if settled.Outcome != writv1.Outcome_NOT_COMMITTED {
		t.Fatalf("u2 never reached a log: want NOT_COMMITTED, have %s@%d", settled.Outcome, settled.Index)
	}
	c.thaw()
	c.waitReady(lead, 40*time.Second)
	r = c.agreeOnOutcome("u2", 30*time.Second)
	if r.Outcome != writv1.Outcome_NOT_COMMITTED || r.Index != settled.Index {
		t.Fatalf("u2 after the leader resumed: %s@%d, settled as %s@%d", r.Outcome, r.Index, settled.Outcome, settled.Index)
	}
	for _, p := range c.nodes {
		if _, err := submitID(p, "u2", "ju2", 2*time.Second); !isNotCommitted(err) {
			t.Fatalf("retry of fenced u2 on %s: want NOT_COMMITTED, have %v", p.name, err)
		}
	}
	c.converge(20 * time.Second)
	for name, ok := range c.jobPresent("ju2") {
		if ok {
			t.Fatalf("%s: job/ju2 is present although u2 is NOT_COMMITTED", name)
		}
	}
}

func isNotCommitted(err error) bool {
	d, ok := api.OutcomeFromError(err)
	return ok && d.Outcome == writv1.Outcome_NOT_COMMITTED && strings.Contains(d.Reason, "new request ID")
}
