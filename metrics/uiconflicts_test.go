package metrics

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestUIConflicts_FakeNode: the conflicts panel's routes with a fake
// node behind them. Listing passes the page's token; resolving takes
// only a JSON POST from the page's own origin, hands the token, the
// fields and the browser's address to the node, and answers a node error
// with its HTTP status.
func TestUIConflicts_FakeNode(t *testing.T) {
	var got UIResolve
	var listTok string
	h := Handler(ServerConfig{UIStatus: func(context.Context) UIStatus { return UIStatus{} },
		UIConflicts: func(_ context.Context, tok string) ([]UIConflict, error) {
			listTok = tok
			if tok == "bad" {
				return nil, &UIError{Status: http.StatusUnauthorized, Msg: "unknown token"}
			}
			return []UIConflict{{Key: "_conflict/job/j1", Rev: 4, Case: json.RawMessage(`{"open":true}`)}}, nil
		},
		UIResolve: func(_ context.Context, r UIResolve) (UIResolved, error) {
			got = r
			if r.Token == "reader" {
				return UIResolved{}, &UIError{Status: http.StatusForbidden, Msg: "needs role operator"}
			}
			return UIResolved{Outcome: "COMMITTED", Index: 12}, nil
		}})
	do := func(method, path, body string, hdr map[string]string) *httptest.ResponseRecorder {
		t.Helper()
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		req.Host = "node1:7079"
		req.RemoteAddr = "10.0.0.9:5555"
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	rec := do(http.MethodGet, "/ui/api/conflicts", "", map[string]string{"X-Writ-Token": "t1"})
	if rec.Code != http.StatusOK || listTok != "t1" || !strings.Contains(rec.Body.String(), `"key":"_conflict/job/j1"`) {
		t.Fatalf("list: %d %q token %q", rec.Code, rec.Body.String(), listTok)
	}
	if rec := do(http.MethodGet, "/ui/api/conflicts", "", map[string]string{"X-Writ-Token": "bad"}); rec.Code != http.StatusUnauthorized {
		t.Fatalf("list with an unknown token: %d", rec.Code)
	}
	js := map[string]string{"Content-Type": "application/json", "Origin": "http://node1:7079", "X-Writ-Token": "op"}
	body := `{"key":"_conflict/job/j1","reason":"fixed","by":"ada"}`
	rec = do(http.MethodPost, "/ui/api/conflicts/resolve", body, js)
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"outcome":"COMMITTED"`) {
		t.Fatalf("resolve: %d %q", rec.Code, rec.Body.String())
	}
	if got != (UIResolve{Key: "_conflict/job/j1", Reason: "fixed", By: "ada", Token: "op", Caller: "10.0.0.9:5555"}) {
		t.Fatalf("the node got %+v", got)
	}
	for name, c := range map[string]struct {
		method, body string
		hdr          map[string]string
		want         int
	}{
		"GET":           {http.MethodGet, "", js, http.StatusMethodNotAllowed},
		"a form post":   {http.MethodPost, "key=x", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, http.StatusUnsupportedMediaType},
		"another site":  {http.MethodPost, body, map[string]string{"Content-Type": "application/json", "Origin": "http://evil.example"}, http.StatusForbidden},
		"unknown field": {http.MethodPost, `{"key":"k","reason":"r","apply_incoming":true}`, js, http.StatusBadRequest},
		"a read token":  {http.MethodPost, body, map[string]string{"Content-Type": "application/json", "X-Writ-Token": "reader"}, http.StatusForbidden},
	} {
		got = UIResolve{}
		if rec := do(c.method, "/ui/api/conflicts/resolve", c.body, c.hdr); rec.Code != c.want {
			t.Errorf("%s: %d %q, want %d", name, rec.Code, rec.Body.String(), c.want)
		}
		if name != "a read token" && got.Key != "" {
			t.Errorf("%s reached the node: %+v", name, got)
		}
	}
}
