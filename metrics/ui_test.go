package metrics

import (
	"context"
	"encoding/json"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

func get(t *testing.T, h http.Handler, path string) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec
}

// TestUIServesPageAndStatus_InProcess: the page and its assets are served
// self-contained, and api/status carries the node's status with outcome
// totals read from the registry.
func TestUIServesPageAndStatus_InProcess(t *testing.T) {
	m := New()
	m.DeclareTypes(map[string]string{"a.b": "request"})
	m.CountOutcome("a.b", "request", "COMMITTED")
	m.CountOutcome("a.b", "request", "COMMITTED")
	m.CountOutcome("a.b", "request", "REJECTED")
	h := Handler(ServerConfig{Metrics: m, UIStatus: func(context.Context) UIStatus {
		return UIStatus{Node: "n1", Leader: "n2", Term: 3, Members: []UIMember{{ID: "n2", Leader: true, Reachable: true, Commit: 9}, {ID: "n1"}}}
	}, UISchema: func() UISchema {
		return UISchema{Fingerprint: "sha256:x", Types: []UIType{{Number: 1, Name: "a.b", Class: "request", Machine: "door"}},
			Machines: []UIMachine{{Name: "door", States: []string{"OPEN", "SHUT"}, Transitions: []UITransition{{From: "OPEN", To: "SHUT", By: []string{"a.b"}}}}}}
	}})

	if rec := get(t, h, "/ui"); rec.Code != http.StatusFound || rec.Header().Get("Location") != "/ui/" {
		t.Fatalf("/ui: %d %q", rec.Code, rec.Header().Get("Location"))
	}
	rec := get(t, h, "/ui/")
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `<script src="app.js">`) {
		t.Fatalf("/ui/: %d\n%s", rec.Code, rec.Body.String())
	}
	if csp := rec.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") {
		t.Fatalf("/ui/ CSP %q", csp)
	}
	for _, f := range []string{"/ui/app.js", "/ui/machines.js", "/ui/style.css"} {
		if rec := get(t, h, f); rec.Code != http.StatusOK || rec.Body.Len() == 0 {
			t.Fatalf("%s: %d", f, rec.Code)
		}
	}

	rec = get(t, h, "/ui/api/schema")
	var sch UISchema
	if err := json.Unmarshal(rec.Body.Bytes(), &sch); err != nil || rec.Code != http.StatusOK {
		t.Fatalf("api/schema: %d %v", rec.Code, err)
	}
	if sch.Fingerprint != "sha256:x" || len(sch.Types) != 1 || len(sch.Machines) != 1 || sch.Machines[0].Transitions[0].By[0] != "a.b" {
		t.Fatalf("api/schema: %+v", sch)
	}

	rec = get(t, h, "/ui/api/status")
	if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("api/status: %d %q", rec.Code, rec.Header().Get("Content-Type"))
	}
	var got struct {
		Node     string             `json:"node"`
		Leader   string             `json:"leader"`
		Term     uint64             `json:"term"`
		Members  []UIMember         `json:"members"`
		Outcomes map[string]float64 `json:"outcomes"`
		ByType   map[string]float64 `json:"committed_by_type"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got.Node != "n1" || got.Leader != "n2" || got.Term != 3 || len(got.Members) != 2 || got.Members[0].Commit != 9 {
		t.Fatalf("status %+v", got)
	}
	if got.Outcomes["COMMITTED"] != 2 || got.Outcomes["REJECTED"] != 1 || got.Outcomes["UNCERTAIN"] != 0 || got.ByType["a.b"] != 2 {
		t.Fatalf("outcomes %v, by type %v", got.Outcomes, got.ByType)
	}
}

// TestUIOffWithoutStatus_InProcess: no status source, no dashboard.
func TestUIOffWithoutStatus_InProcess(t *testing.T) {
	if rec := get(t, Handler(ServerConfig{}), "/ui/"); rec.Code != http.StatusNotFound {
		t.Fatalf("/ui/ without UIStatus: %d", rec.Code)
	}
}

// TestUIAssetsLoadNothingFromElsewhere: no CDN, no absolute URL, and no
// markup built from strings (every value is set as text).
func TestUIAssetsLoadNothingFromElsewhere(t *testing.T) {
	abs := regexp.MustCompile(`(?i)(https?:)?//[a-z0-9.-]+\.[a-z]{2,}`)
	err := fs.WalkDir(uiFiles, "ui", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(uiFiles, path)
		if err != nil {
			return err
		}
		// the SVG namespace is a name, not something fetched
		b = []byte(strings.ReplaceAll(string(b), `"http://www.w3.org/2000/svg"`, ""))
		if loc := abs.Find(b); loc != nil {
			t.Errorf("%s refers to %q", path, loc)
		}
		if strings.Contains(string(b), "innerHTML") {
			t.Errorf("%s uses innerHTML", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
