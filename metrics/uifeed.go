package metrics

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// FeedSize is how many recent outcomes the dashboard's live feed keeps.
const FeedSize = 50

// UIOutcome is one committed outcome of the node's watch stream, as the
// live feed shows it: the same fields as `writctl watch`.
type UIOutcome struct {
	Index  uint64 `json:"index"`
	Pos    int    `json:"pos"`
	Type   string `json:"type"`
	Class  string `json:"class"`
	Key    string `json:"key"`
	ID     string `json:"id"`
	Status string `json:"status"`
	Reason string `json:"reason,omitempty"`
}

// UIFeedCursor is where the page left off: strictly after the event
// (Index, Pos). The zero cursor asks for the most recent outcomes.
type UIFeedCursor struct {
	Index uint64 `json:"index"`
	Pos   int    `json:"pos"`
}

// UIFeedPage is /ui/api/feed: up to FeedSize outcomes after the cursor,
// oldest first, and the cursor to ask with next time. Reset says the
// outcomes do not continue the asked cursor (it was zero, compacted away,
// or too far behind), so the page replaces its list instead of appending.
type UIFeedPage struct {
	Outcomes []UIOutcome  `json:"outcomes"`
	Next     UIFeedCursor `json:"next"`
	Reset    bool         `json:"reset"`
}

// serveFeed answers /ui/api/feed?after=INDEX&pos=POS.
func serveFeed(w http.ResponseWriter, r *http.Request, c ServerConfig) {
	if c.UIFeed == nil {
		http.Error(w, "metrics: this node serves no live feed", http.StatusNotFound)
		return
	}
	var cur UIFeedCursor
	q := r.URL.Query()
	if s := q.Get("after"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			http.Error(w, "metrics: feed: after="+strconv.Quote(s)+" is not a log index (fix: a non-negative integer, e.g. after=0)", http.StatusBadRequest)
			return
		}
		cur.Index = v
	}
	if s := q.Get("pos"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 0 {
			http.Error(w, "metrics: feed: pos="+strconv.Quote(s)+" is not a position (fix: a non-negative integer, e.g. pos=0)", http.StatusBadRequest)
			return
		}
		cur.Pos = v
	}
	ctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
	defer cancel()
	page, err := c.UIFeed(ctx, cur)
	if err != nil {
		http.Error(w, "metrics: feed: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	if page.Outcomes == nil {
		page.Outcomes = []UIOutcome{}
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(page)
}
