package node

import (
	"context"
	"errors"

	"github.com/writ-dev/writ/metrics"
	"github.com/writ-dev/writ/pipeline"
)

const (
	// feedScan bounds the events one feed request reads.
	feedScan = 4096
	// feedBehind: a cursor this many log indexes behind the applied index
	// restarts at the most recent outcomes instead of replaying them.
	feedBehind = 10000
)

// uiFeed is the dashboard's live feed: the outcomes this node's watch
// stream carries after the cursor, the last metrics.FeedSize of them (the
// zero cursor: those of the last metrics.FeedSize log indexes).
func (n *Node) uiFeed(ctx context.Context, after metrics.UIFeedCursor) (metrics.UIFeedPage, error) {
	applied := n.rs.Status().Applied
	page := metrics.UIFeedPage{Next: after}
	if after.Index == 0 || after.Index+feedBehind < applied {
		page.Reset, page.Next = true, metrics.UIFeedCursor{}
	}
	for attempt := 0; ; attempt++ {
		wt := n.pl.WatchAfter(after.Index, after.Pos, pipeline.Filter{})
		if page.Reset {
			from := uint64(1)
			if applied > metrics.FeedSize {
				from = applied - metrics.FeedSize + 1
			}
			wt = n.pl.Watch(from, pipeline.Filter{})
		}
		err := feedRead(ctx, wt, &page)
		if ce := (*pipeline.CompactedError)(nil); errors.As(err, &ce) && attempt == 0 && !page.Reset {
			page.Reset, page.Next, page.Outcomes = true, metrics.UIFeedCursor{}, nil
			continue
		}
		if err != nil {
			return metrics.UIFeedPage{}, err
		}
		return page, nil
	}
}

// feedRead polls wt until it has nothing more (or feedScan events), keeping
// the last metrics.FeedSize outcomes and the cursor after the last one.
func feedRead(ctx context.Context, wt *pipeline.Watcher, page *metrics.UIFeedPage) error {
	for i := 0; i < feedScan; i++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		ev, ok, err := wt.Poll()
		if err != nil || !ok {
			return err
		}
		if len(page.Outcomes) == metrics.FeedSize {
			page.Outcomes = append(page.Outcomes[:0], page.Outcomes[1:]...)
		}
		page.Outcomes = append(page.Outcomes, metrics.UIOutcome{Index: ev.Index, Pos: ev.Pos, Type: ev.Type, Class: ev.Class.String(),
			Key: ev.Key, ID: ev.ID, Status: eventStatus(ev), Reason: ev.Reason})
		page.Next = metrics.UIFeedCursor{Index: ev.Index, Pos: ev.Pos}
	}
	return nil
}
