package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/writ-dev/writ/api/writv1"
)

// openJobConflict opens a conflict case on c: job j in queue qc is
// dispatched, runs and completes, then a report says it runs again (a
// fact contradicting a terminal state). It returns the case key.
func openJobConflict(t *testing.T, c *cluster, l *proc, j string) string {
	t.Helper()
	for _, s := range []struct{ typ, payload string }{
		{"queue.control", `{"queue":"qc","action":"create"}`},
		{"job.submit", `{"job_id":"` + j + `","queue":"qc","priority":3,"command":"run"}`},
		{"worker.join", `{"worker_id":"wc","capacity":2}`},
	} {
		if r, err := submit(l, s.typ, s.payload, 5*time.Second); err != nil || r.Outcome != writv1.Outcome_COMMITTED {
			t.Fatalf("%s: %v %v", s.typ, r, err)
		}
	}
	if code, out, errs := c.writctl(l, "deliver", "job.dispatch", `{"dispatch_id":"dc-`+j+`","scheduler":"s","items":[{"job_id":"`+j+`","worker_id":"wc"}]}`); code != 0 {
		t.Fatalf("deliver: %d %s %s", code, out, errs)
	}
	deadline := time.Now().Add(20 * time.Second)
	for i, st := range []string{"RUNNING", "COMPLETED"} {
		for {
			code, out, _ := c.writctl(l, "get", "_m/job/"+j)
			if code == 0 && strings.Contains(out, []string{"DISPATCHED", "RUNNING"}[i]) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("job %s never reached the state before %s: %s", j, st, out)
			}
			time.Sleep(50 * time.Millisecond)
		}
		if _, err := report(l, "job.state_report", `{"report_id":"rc-`+j+`-`+strings.ToLower(st)+`","job_id":"`+j+`","state":"`+st+`","seq":`+strconv.Itoa(i+1)+`,"worker_id":"wc"}`); err != nil {
			t.Fatal(err)
		}
	}
	for {
		code, out, _ := c.writctl(l, "get", "_m/job/"+j)
		if code == 0 && strings.Contains(out, "COMPLETED") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s never COMPLETED: %s", j, out)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := report(l, "job.state_report", `{"report_id":"rc-`+j+`-again","job_id":"`+j+`","state":"RUNNING","seq":3,"worker_id":"wc"}`); err != nil {
		t.Fatal(err)
	}
	return "_conflict/job/" + j
}

// conflictView is the conflicts panel as the test reads it off the page.
type conflictView struct {
	Keys []string `json:"keys"`
	Msg  string   `json:"msg"`
}

const readConflicts = `(() => ({
  keys: [...document.querySelectorAll("#conflict-cases tbody tr")].map((r) => r.dataset.key),
  msg: document.getElementById("conflicts-msg").textContent,
}))()`

// resolveOnDashboard opens a conflict case, waits for the page's
// conflicts panel to list it, resolves it there (reason and name typed,
// Resolve clicked) and checks the panel empties, the page says COMMITTED
// and the case is closed in the log with that reason and name.
func resolveOnDashboard(ctx context.Context, t *testing.T, c *cluster, l *proc) {
	t.Helper()
	key := openJobConflict(t, c, l, "uc1")
	waitPanel := func(what string, ok func(conflictView) bool) conflictView {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for {
			v, err := chromedp.Run(ctx, chromedp.Evaluate[conflictView](readConflicts))
			if err != nil {
				t.Fatalf("reading the conflicts panel: %v", err)
			}
			if ok(v) {
				return v
			}
			if time.Now().After(deadline) {
				t.Fatalf("dashboard: %s not shown within 15s; panel shows %+v", what, v)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	waitPanel("the open case "+key, func(v conflictView) bool { return len(v.Keys) == 1 && v.Keys[0] == key })
	screenshot(ctx, t, "dashboard-conflict.png")
	row := `#conflict-cases tbody tr[data-key="` + key + `"]`
	// Resolve without a reason: refused on the page, nothing sent.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(row+" button"))); err != nil {
		t.Fatal(err)
	}
	waitPanel("the missing reason", func(v conflictView) bool { return strings.Contains(v.Msg, "say why") && len(v.Keys) == 1 })
	const reason = "re-run by hand (dashboard test)"
	if err := chromedp.Do(ctx, chromedp.SetValue(chromedp.ID("resolve-by"), "dash-operator"),
		chromedp.SetValue(chromedp.CSS(row+" input.reason"), reason), chromedp.Click(chromedp.CSS(row+" button"))); err != nil {
		t.Fatal(err)
	}
	v := waitPanel("the case resolved", func(v conflictView) bool { return len(v.Keys) == 0 && strings.HasPrefix(v.Msg, "COMMITTED") })
	t.Logf("conflicts panel after Resolve: %q", v.Msg)
	code, out, errs := c.writctl(c.nodes[1], "-o", "json", "conflicts", "show", key)
	if code != 0 {
		t.Fatalf("conflicts show %s: %d %s %s", key, code, out, errs)
	}
	var cs struct {
		Case struct {
			Open       bool `json:"open"`
			Resolution *struct {
				By, Reason string
			} `json:"resolution"`
		} `json:"case"`
	}
	if err := json.Unmarshal([]byte(out), &cs); err != nil {
		t.Fatalf("conflicts show -o json: %v\n%s", err, out)
	}
	if cs.Case.Open || cs.Case.Resolution == nil || cs.Case.Resolution.Reason != reason || !strings.HasPrefix(cs.Case.Resolution.By, "dash-operator (") {
		t.Fatalf("case after resolving on the dashboard: %s", out)
	}
}

// TestDashboardConflictsAuth: with API authentication on, the
// dashboard's conflicts routes hold the API's rules. One real node with
// client TLS and tokens on 127.0.17.21: listing without a token is 401,
// with a read token 200; resolving with a read token is 403, with an
// operator token it reaches the API (which refuses the unknown case), and
// the node's audit log records the operator.
func TestDashboardConflictsAuth(t *testing.T) {
	s := newSecureCluster(t, []string{"--metrics-addr", "127.0.17.21:7079"}, "127.0.17.21")
	base := "http://127.0.17.21:7079/ui/api/conflicts"
	call := func(method, url, token, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, url, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("X-Writ-Token", token)
		}
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := (&http.Client{Timeout: 20 * time.Second}).Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, url, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := call(http.MethodGet, base, "", ""); code != http.StatusUnauthorized {
		t.Errorf("list without a token: %d %s", code, body)
	}
	if code, body := call(http.MethodGet, base, s.tokens["reader"], ""); code != http.StatusOK || !strings.Contains(body, `"conflicts":[]`) {
		t.Errorf("list with a read token: %d %s", code, body)
	}
	resolve := `{"key":"_conflict/job/none","reason":"dashboard auth test","by":"ada"}`
	if code, body := call(http.MethodPost, base+"/resolve", s.tokens["reader"], resolve); code != http.StatusForbidden || !strings.Contains(body, "operator") {
		t.Errorf("resolve with a read token: %d %s", code, body)
	}
	code, body := call(http.MethodPost, base+"/resolve", s.tokens["ops"], resolve)
	if code == http.StatusOK || code == http.StatusUnauthorized || code == http.StatusForbidden {
		t.Errorf("resolve of an unknown case with an operator token: %d %s", code, body)
	}
	t.Logf("operator resolving an unknown case: %d %s", code, strings.TrimSpace(body))
	p := s.nodes[0]
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, _ := os.ReadFile(p.dir + ".log")
		if bytes.Contains(b, []byte("ResolveConflict")) && bytes.Contains(b, []byte("identity=ops")) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no audit line for the operator's ResolveConflict in %s's log", p.name)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
