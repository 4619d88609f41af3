package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/writ-dev/writ/api/writv1"
	"github.com/writ-dev/writ/examples/jobs/jobsgen"
)

// chromiumPath finds the Debian Chromium the dashboard test drives. A
// missing browser fails the test (with how to install it) unless
// WRITTEST_SKIP_BROWSER=1 asks explicitly to skip.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "/usr/bin/chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("WRITTEST_SKIP_BROWSER") == "1" {
		t.Skip("no chromium and WRITTEST_SKIP_BROWSER=1")
	}
	t.Fatal("dashboard test: chromium not found (fix: `apt-get install -y chromium`, or set WRITTEST_SKIP_BROWSER=1 to skip this test)")
	return ""
}

// dashView is what the test reads off the rendered page.
type dashView struct {
	Rows    int             `json:"rows"`
	Leaders int             `json:"leaders"`
	Commit  string          `json:"commit"`
	Leader  string          `json:"leader"`
	Down    map[string]bool `json:"down"`
	// Machines are the drawn machine diagrams, each with its states.
	Machines map[string][]string `json:"machines"`
	Classes  int                 `json:"classes"`
	Health   map[string]string   `json:"health"`
	// Feed is the live feed's rows, newest first.
	Feed []feedRow `json:"feed"`
}

type feedRow struct {
	Index, Type, Key, ID, Status string
}

const readDash = `(() => {
  const rows = [...document.querySelectorAll("#members tbody tr")];
  const down = {}, health = {};
  for (const r of rows) { down[r.dataset.node] = r.classList.contains("down"); health[r.dataset.node] = r.cells[10].textContent; }
  const machines = {};
  for (const m of document.querySelectorAll("svg.machine")) machines[m.dataset.machine] = [...m.querySelectorAll(".state")].map((s) => s.dataset.state);
  const feed = [...document.querySelectorAll("#feed tbody tr")].map((r) => {
    const [Index, Type, Key, ID, Status] = [...r.cells].map((c) => c.textContent);
    return {Index, Type, Key, ID, Status};
  });
  return {feed, machines, classes: document.querySelectorAll("#classes tbody tr").length, rows: rows.length, leaders: document.querySelectorAll("#members .badge.leader").length,
    commit: document.getElementById("commit").textContent, leader: document.getElementById("leader").textContent, down, health};
})()`

// TestCluster_DashboardInChromium loads /ui from a real 3-node cluster in
// headless Chromium: it shows 3 members and one leader, the commit index
// it shows moves after submits, a job submitted with a known request ID
// appears in the live feed of committed outcomes, the schema's machines are drawn and its
// classification table listed, a conflict case is listed and resolved
// from the page, and a killed node's row turns unhealthy.
func TestCluster_DashboardInChromium(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test: skipped with -short")
	}
	chrome := chromiumPath(t)
	c := newMetricsCluster(t, nil, "127.0.46.1", "127.0.46.2", "127.0.46.3")

	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chrome), chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1400, 900),
		chromedp.Flag("headless", true), chromedp.Flag("no-sandbox", true), chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true), chromedp.Flag("no-first-run", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
	}
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelA()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancelT := context.WithTimeout(ctx, 90*time.Second)
	defer cancelT()

	read := func() dashView {
		v, err := chromedp.Run(ctx, chromedp.Evaluate[dashView](readDash))
		if err != nil {
			t.Fatalf("reading the page: %v", err)
		}
		return v
	}
	waitFor := func(what string, d time.Duration, ok func(dashView) bool) dashView {
		deadline := time.Now().Add(d)
		for {
			v := read()
			if ok(v) {
				return v
			}
			if time.Now().After(deadline) {
				t.Fatalf("dashboard: %s not shown within %v; page shows %+v", what, d, v)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}

	url := "http://" + c.nodes[0].host + ":7079/ui/"
	if err := chromedp.Do(ctx, chromedp.Navigate(url), chromedp.WaitVisible(chromedp.CSS("#members"))); err != nil {
		t.Fatalf("loading %s: %v", url, err)
	}
	v := waitFor("3 members with one leader", 15*time.Second, func(v dashView) bool {
		_, err := strconv.ParseUint(v.Commit, 10, 64)
		return v.Rows == 3 && v.Leaders == 1 && v.Leader != "none" && err == nil
	})
	before, _ := strconv.ParseUint(v.Commit, 10, 64)
	cat := jobsgen.Catalog()
	v = waitFor("the schema's machines and classification table", 5*time.Second, func(v dashView) bool {
		if v.Classes != len(cat.Types()) || len(v.Machines) != len(cat.Schema().Machines) {
			return false
		}
		for _, m := range cat.Schema().Machines {
			if strings.Join(v.Machines[m.Name], " ") != strings.Join(m.States, " ") {
				return false
			}
		}
		return true
	})

	l := c.leader(10 * time.Second)
	if _, err := submit(l, "queue.control", `{"queue":"q","action":"create"}`, 5*time.Second); err != nil {
		t.Fatalf("create queue: %v", err)
	}
	for i := 0; i < 20; i++ {
		if _, err := submit(l, "job.submit", fmt.Sprintf(`{"job_id":"ui-%d","queue":"q","priority":1,"command":"x"}`, i), 5*time.Second); err != nil {
			t.Fatalf("submit %d: %v", i, err)
		}
	}
	v = waitFor("a higher commit index", 10*time.Second, func(v dashView) bool {
		n, err := strconv.ParseUint(v.Commit, 10, 64)
		return err == nil && n >= before+20
	})
	t.Logf("commit index on the page: %d -> %s", before, v.Commit)

	// A job submitted with a known request ID shows up in the live feed
	// (read from the watch stream of the node serving the page, which
	// need not be the leader), newest first, with its type and key.
	const reqID = "ui-feed-req-1"
	if _, err := submitID(l, reqID, "ui-feed-job", 5*time.Second); err != nil {
		t.Fatalf("submit %s: %v", reqID, err)
	}
	v = waitFor("the submitted job in the live feed", 10*time.Second, func(v dashView) bool {
		return len(v.Feed) > 0 && v.Feed[0].ID == "req:"+reqID
	})
	if got := v.Feed[0]; got.Type != "job.submit" || got.Status != "apply" || !strings.Contains(got.Key, "ui-feed-job") {
		t.Fatalf("live feed row for %s: %+v", reqID, got)
	}
	seen := map[string]bool{}
	for _, r := range v.Feed {
		if seen[r.Index+" "+r.ID] {
			t.Fatalf("live feed shows %s at %s twice: %+v", r.ID, r.Index, v.Feed)
		}
		seen[r.Index+" "+r.ID] = true
	}
	if len(v.Feed) < 21 || len(v.Feed) > 50 {
		t.Fatalf("live feed: %d rows, want the 21 submits (at most 50)", len(v.Feed))
	}
	t.Logf("live feed: %d rows, newest %+v", len(v.Feed), v.Feed[0])
	checkFeedCursor(t, c.nodes[1], v.Feed[1].Index, "req:"+reqID)

	screenshot(ctx, t, "dashboard.png")

	// The page's polling asks members for their status without the
	// applied-state hash (a full pass over the state every second).
	for _, skip := range []bool{true, false} {
		st, err := c.nodes[1].client.Status(context.Background(), &writv1.StatusRequest{WithoutStateHash: skip})
		if err != nil {
			t.Fatal(err)
		}
		if (st.StateHash == "") != skip {
			t.Fatalf("Status without_state_hash=%v: state_hash %q", skip, st.StateHash)
		}
	}

	// A conflict case shows up in the conflicts panel and is resolved
	// from the page.
	resolveOnDashboard(ctx, t, c, l)

	victim := c.nodes[2]
	c.kill(victim)
	waitFor("the killed node as unhealthy", 10*time.Second, func(v dashView) bool {
		return v.Down[victim.name] && v.Health[victim.name] == "unreachable"
	})
	screenshot(ctx, t, "dashboard-node-down.png")
}

// checkFeedCursor asks a node's /ui/api/feed directly: without a cursor
// it restarts at the recent outcomes (reset), and after the second newest
// outcome it returns exactly the newest one, continuing the cursor.
func checkFeedCursor(t *testing.T, p *proc, second, newestID string) {
	t.Helper()
	type page struct {
		Outcomes []struct {
			Index uint64 `json:"index"`
			ID    string `json:"id"`
		} `json:"outcomes"`
		Next struct {
			Index uint64 `json:"index"`
			Pos   int    `json:"pos"`
		} `json:"next"`
		Reset bool `json:"reset"`
	}
	get := func(q string) page {
		code, body := httpGet(t, "http://"+p.host+":7079/ui/api/feed"+q)
		var pg page
		if err := json.Unmarshal([]byte(body), &pg); code != http.StatusOK || err != nil {
			t.Fatalf("%s /ui/api/feed%s: %d %v %s", p.name, q, code, err, body)
		}
		return pg
	}
	// p need not have applied the newest outcome yet: wait for it
	fresh := get("")
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline) && (len(fresh.Outcomes) == 0 || fresh.Outcomes[len(fresh.Outcomes)-1].ID != newestID); {
		time.Sleep(100 * time.Millisecond)
		fresh = get("")
	}
	if !fresh.Reset || len(fresh.Outcomes) == 0 || fresh.Outcomes[len(fresh.Outcomes)-1].ID != newestID {
		t.Fatalf("%s /ui/api/feed without a cursor: %+v", p.name, fresh)
	}
	after := get("?after=" + second + "&pos=0")
	if after.Reset || len(after.Outcomes) != 1 || after.Outcomes[0].ID != newestID || after.Next.Index != after.Outcomes[0].Index {
		t.Fatalf("%s /ui/api/feed?after=%s: %+v", p.name, second, after)
	}
	if code, body := httpGet(t, "http://"+p.host+":7079/ui/api/feed?after=-1"); code != http.StatusBadRequest || !strings.Contains(body, "after=") {
		t.Fatalf("%s /ui/api/feed?after=-1: %d %s", p.name, code, body)
	}
}

// screenshot saves the page as a PNG in the test's temp dir and, when
// TESTUI_SCREENSHOT_DIR is set, there too (CI keeps it as an artefact).
func screenshot(ctx context.Context, t *testing.T, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	dirs := []string{t.TempDir()}
	if d := os.Getenv("TESTUI_SCREENSHOT_DIR"); d != "" {
		dirs = append(dirs, d)
	}
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, name), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
