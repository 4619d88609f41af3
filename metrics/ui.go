package metrics

import (
	"context"
	"embed"
	"encoding/json"
	"io/fs"
	"net/http"
	"sort"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The dashboard's page, script and style, served under /ui/ as they are:
// no build step and nothing fetched from elsewhere.
//
//go:embed ui
var uiFiles embed.FS

// UIStatus is what the dashboard shows of the cluster, as the node serving
// it sees it: its own status and every member's (fetched from the member's
// API, like `writctl status`). It holds no key material.
type UIStatus struct {
	Node          string      `json:"node"`
	Version       string      `json:"version"`
	Fingerprint   string      `json:"fingerprint"`
	Leader        string      `json:"leader"`
	Term          uint64      `json:"term"`
	Health        string      `json:"health"`
	HealthReasons []string    `json:"health_reasons"`
	Ready         bool        `json:"ready"`
	NotReady      string      `json:"not_ready"`
	OutboxDepth   int         `json:"outbox_depth"`
	OpenConflicts int         `json:"open_conflicts"`
	Plugins       []UIPlugin  `json:"plugins"`
	Members       []UIMember  `json:"members"`
	Refused       []UIRefusal `json:"refused"`
}

// UIMember is one member row: the gossip and consensus view (role, match)
// joined with the member's own reported status.
type UIMember struct {
	ID          string `json:"id"`
	APIAddr     string `json:"api_addr"`
	Role        string `json:"role"`
	Gossip      string `json:"gossip"`
	Leader      bool   `json:"leader"`
	Match       uint64 `json:"match"`
	Reachable   bool   `json:"reachable"`
	Error       string `json:"error,omitempty"`
	Term        uint64 `json:"term"`
	Commit      uint64 `json:"commit"`
	Applied     uint64 `json:"applied"`
	Lag         uint64 `json:"lag"`
	Ready       bool   `json:"ready"`
	NotReady    string `json:"not_ready,omitempty"`
	Health      string `json:"health"`
	OutboxDepth uint64 `json:"outbox_depth"`
	Conflicts   uint64 `json:"open_conflicts"`
	Fingerprint string `json:"fingerprint"`
	Version     string `json:"version"`
	// CatchUp is the member's own report of its catch-up (nil: none).
	CatchUp *UICatchUp `json:"catch_up,omitempty"`
}

// UICatchUp is a member's progress towards the leader's commit index.
type UICatchUp struct {
	Active  bool    `json:"active"`
	Applied uint64  `json:"applied"`
	Target  uint64  `json:"target"`
	Percent float64 `json:"percent"`
	Rate    float64 `json:"entries_per_second"`
	ETAms   uint64  `json:"eta_ms"`
}

// UIPlugin is one handler plugin of the serving node.
type UIPlugin struct {
	Name     string `json:"name"`
	Healthy  bool   `json:"healthy"`
	State    string `json:"state"`
	Restarts int    `json:"restarts"`
}

// UIRefusal is a node that gossips but is not admitted.
type UIRefusal struct {
	ID     string `json:"id"`
	Reason string `json:"reason"`
}

// uiResponse is /ui/api/status: the status plus this node's outcome
// counters (the page turns successive readings into rates).
type uiResponse struct {
	UIStatus
	Time     time.Time          `json:"time"`
	Outcomes map[string]float64 `json:"outcomes"`
	ByType   map[string]float64 `json:"committed_by_type"`
}

// mountUI adds /ui/, /ui/api/status, /ui/api/schema, /ui/api/feed and
// /ui/api/conflicts(/resolve) to mux.
func mountUI(mux *http.ServeMux, c ServerConfig) {
	sub, err := fs.Sub(uiFiles, "ui")
	if err != nil {
		panic("metrics: embedded ui: " + err.Error()) // the directory is compiled in
	}
	files := http.StripPrefix("/ui/", http.FileServer(http.FS(sub)))
	mux.HandleFunc("/ui", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/ui/", http.StatusFound)
	})
	mux.Handle("/ui/", securityHeaders(files))
	mux.HandleFunc("/ui/api/feed", func(w http.ResponseWriter, r *http.Request) { serveFeed(w, r, c) })
	mux.HandleFunc("/ui/api/schema", func(w http.ResponseWriter, _ *http.Request) { serveSchema(w, c) })
	if c.UIConflicts != nil && c.UIResolve != nil {
		mux.HandleFunc("/ui/api/conflicts", func(w http.ResponseWriter, r *http.Request) { serveConflicts(w, r, c) })
		mux.HandleFunc("/ui/api/conflicts/resolve", func(w http.ResponseWriter, r *http.Request) { serveResolve(w, r, c) })
	}
	mux.HandleFunc("/ui/api/status", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
		defer cancel()
		resp := uiResponse{Time: time.Now().UTC()}
		resp.UIStatus = c.UIStatus(ctx)
		if c.Metrics != nil {
			resp.Outcomes, resp.ByType = outcomeTotals(c.Metrics.reg)
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		enc := json.NewEncoder(w)
		enc.SetIndent("", " ")
		_ = enc.Encode(resp)
	})
}

func serveSchema(w http.ResponseWriter, c ServerConfig) {
	s := UISchema{}
	if c.UISchema != nil {
		s = c.UISchema()
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(s)
}

// securityHeaders keeps the page self-contained: it may load nothing from
// elsewhere and may not be framed.
func securityHeaders(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", "default-src 'self'; frame-ancestors 'none'")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		h.ServeHTTP(w, r)
	})
}

// outcomeTotals sums writ_entries_total by outcome, and the COMMITTED
// series by type, from the node's registry.
func outcomeTotals(g prometheus.Gatherer) (map[string]float64, map[string]float64) {
	byOutcome := map[string]float64{}
	for _, o := range Outcomes {
		byOutcome[o] = 0
	}
	byType := map[string]float64{}
	mfs, err := g.Gather()
	if err != nil {
		return byOutcome, byType
	}
	for _, mf := range mfs {
		if mf.GetName() != "writ_entries_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			var typ, outcome string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "type":
					typ = l.GetValue()
				case "outcome":
					outcome = l.GetValue()
				}
			}
			v := m.GetCounter().GetValue()
			byOutcome[outcome] += v
			if outcome == "COMMITTED" {
				byType[typ] += v
			}
		}
	}
	return byOutcome, byType
}

// SortMembers orders member rows by ID (stable output for the page).
func SortMembers(ms []UIMember) {
	sort.Slice(ms, func(i, j int) bool { return ms[i].ID < ms[j].ID })
}
