package metrics

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"
)

// UIConflict is one conflict case as the dashboard lists it: its key,
// revision and the durable case (JSON), as `writctl conflicts` shows it.
type UIConflict struct {
	Key  string          `json:"key"`
	Rev  uint64          `json:"rev"`
	Case json.RawMessage `json:"case"`
}

// UIResolve is the page's request to close one conflict case. Token is
// the operator's bearer token (empty when the API needs none); the node
// checks it as the API checks writctl's.
type UIResolve struct {
	Key    string `json:"key"`
	Reason string `json:"reason"`
	By     string `json:"by"`
	Token  string `json:"-"`
	// Caller is the browser's address, recorded with By.
	Caller string `json:"-"`
}

// UIResolved is the outcome of a UIResolve.
type UIResolved struct {
	Outcome string          `json:"outcome"`
	Index   uint64          `json:"index"`
	Reason  string          `json:"reason,omitempty"`
	Case    json.RawMessage `json:"case,omitempty"`
}

// UIError is an error with the HTTP status the dashboard's API answers
// with (401 no or unknown token, 403 a token without the role, 400 a bad
// request, 503 no quorum).
type UIError struct {
	Status int
	Msg    string
}

func (e *UIError) Error() string { return e.Msg }

// uiTokenHeader carries the operator's token from the page. A custom
// header also keeps other sites' pages from posting here: a browser sends
// one cross-origin only after a CORS preflight, which this listener never
// grants.
const uiTokenHeader = "X-Writ-Token"

// serveConflicts answers GET /ui/api/conflicts (the open cases).
func serveConflicts(w http.ResponseWriter, r *http.Request, c ServerConfig) {
	if r.Method != http.MethodGet {
		http.Error(w, "metrics: conflicts: use GET", http.StatusMethodNotAllowed)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
	defer cancel()
	cs, err := c.UIConflicts(ctx, r.Header.Get(uiTokenHeader))
	if err != nil {
		uiFail(w, "conflicts", err)
		return
	}
	if cs == nil {
		cs = []UIConflict{}
	}
	uiJSON(w, map[string]any{"conflicts": cs})
}

// serveResolve answers POST /ui/api/conflicts/resolve with a JSON body
// {key, reason, by}.
func serveResolve(w http.ResponseWriter, r *http.Request, c ServerConfig) {
	if r.Method != http.MethodPost {
		http.Error(w, "metrics: resolve: use POST", http.StatusMethodNotAllowed)
		return
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		http.Error(w, "metrics: resolve: the body must be JSON (Content-Type: application/json)", http.StatusUnsupportedMediaType)
		return
	}
	if o := r.Header.Get("Origin"); o != "" && o != "http://"+r.Host && o != "https://"+r.Host {
		http.Error(w, "metrics: resolve: only the dashboard served here may resolve cases (Origin "+o+")", http.StatusForbidden)
		return
	}
	var req UIResolve
	dec := json.NewDecoder(io.LimitReader(r.Body, 64<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		http.Error(w, "metrics: resolve: body: "+err.Error()+` (fix: {"key":"_conflict/M/I","reason":"why","by":"name"})`, http.StatusBadRequest)
		return
	}
	req.Token, req.Caller = r.Header.Get(uiTokenHeader), r.RemoteAddr
	ctx, cancel := context.WithTimeout(r.Context(), 15*time.Second)
	defer cancel()
	res, err := c.UIResolve(ctx, req)
	if err != nil {
		uiFail(w, "resolve", err)
		return
	}
	uiJSON(w, res)
}

func uiFail(w http.ResponseWriter, what string, err error) {
	code := http.StatusServiceUnavailable
	var ue *UIError
	if errors.As(err, &ue) {
		code = ue.Status
	}
	http.Error(w, "metrics: "+what+": "+err.Error(), code)
}

func uiJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(v)
}
