package metrics

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestUIFeedCursorAndBadInput_InProcess: /ui/api/feed hands the page's
// cursor to the node and returns its page as JSON (an empty list, not
// null); a bad cursor is one line naming the parameter and the fix.
func TestUIFeedCursorAndBadInput_InProcess(t *testing.T) {
	var asked []UIFeedCursor
	status := func(context.Context) UIStatus { return UIStatus{Node: "n1"} }
	h := Handler(ServerConfig{UIStatus: status, UIFeed: func(_ context.Context, c UIFeedCursor) (UIFeedPage, error) {
		asked = append(asked, c)
		if c.Index == 0 {
			return UIFeedPage{Reset: true, Outcomes: []UIOutcome{{Index: 7, Pos: 1, Type: "a.b", Key: "k/1", ID: "req:x", Status: "apply"}}, Next: UIFeedCursor{Index: 7, Pos: 1}}, nil
		}
		return UIFeedPage{Next: c}, nil
	}})

	rec := get(t, h, "/ui/api/feed")
	var page UIFeedPage
	if err := json.Unmarshal(rec.Body.Bytes(), &page); err != nil || rec.Code != http.StatusOK {
		t.Fatalf("api/feed: %d %v\n%s", rec.Code, err, rec.Body.String())
	}
	if !page.Reset || len(page.Outcomes) != 1 || page.Outcomes[0].ID != "req:x" || page.Next != (UIFeedCursor{Index: 7, Pos: 1}) {
		t.Fatalf("api/feed: %+v", page)
	}
	rec = get(t, h, "/ui/api/feed?after=7&pos=1")
	if !strings.Contains(rec.Body.String(), `"outcomes":[]`) {
		t.Fatalf("api/feed with nothing new: %s", rec.Body.String())
	}
	if len(asked) != 2 || asked[1] != (UIFeedCursor{Index: 7, Pos: 1}) {
		t.Fatalf("cursors handed to the node: %+v", asked)
	}

	for q, want := range map[string]string{"after=x": "after=\"x\" is not a log index", "after=1&pos=-1": "pos=\"-1\" is not a position"} {
		rec := get(t, h, "/ui/api/feed?"+q)
		body := strings.TrimSpace(rec.Body.String())
		if rec.Code != http.StatusBadRequest || !strings.Contains(body, want) || !strings.Contains(body, "fix:") || strings.Contains(body, "\n") {
			t.Errorf("api/feed?%s: %d %q", q, rec.Code, body)
		}
	}
	if len(asked) != 2 {
		t.Fatalf("a bad cursor reached the node: %+v", asked)
	}

	noFeed := Handler(ServerConfig{UIStatus: status})
	if rec := get(t, noFeed, "/ui/api/feed"); rec.Code != http.StatusNotFound {
		t.Fatalf("api/feed without UIFeed: %d", rec.Code)
	}
}
