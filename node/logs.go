package node

import (
	"context"
	"encoding/json"
	"log/slog"
	"regexp"
	"strings"
)

// uniqueKeys wraps a handler so that every line carries each attribute key
// once. Components add the attributes that identify them (raftstore adds
// "component" and "node", membership "node") to a logger that already
// carries them from the node; a later value replaces the earlier one
// instead of being written a second time.
func uniqueKeys(h slog.Handler) slog.Handler { return &uniqueHandler{base: h, h: h} }

type uniqueHandler struct {
	base  slog.Handler // without the attrs below
	attrs []slog.Attr
	h     slog.Handler // base.WithAttrs(attrs)
}

func (u *uniqueHandler) Enabled(ctx context.Context, l slog.Level) bool { return u.h.Enabled(ctx, l) }

func (u *uniqueHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.NumAttrs() == 0 {
		return u.h.Handle(ctx, r)
	}
	clash := false
	seen := make(map[string]bool, r.NumAttrs())
	r.Attrs(func(a slog.Attr) bool {
		if seen[a.Key] || u.has(a.Key) {
			clash = true
		}
		seen[a.Key] = true
		return true
	})
	if !clash {
		return u.h.Handle(ctx, r)
	}
	// Rare: a line repeats a key of its own or of the logger's. The line's
	// last value wins.
	var rec []slog.Attr
	r.Attrs(func(a slog.Attr) bool { rec = merge(rec, a); return true })
	var keep []slog.Attr
	for _, a := range u.attrs {
		if !seen[a.Key] {
			keep = append(keep, a)
		}
	}
	nr := slog.NewRecord(r.Time, r.Level, r.Message, r.PC)
	nr.AddAttrs(rec...)
	return u.base.WithAttrs(keep).Handle(ctx, nr)
}

func (u *uniqueHandler) has(k string) bool {
	for _, a := range u.attrs {
		if a.Key == k {
			return true
		}
	}
	return false
}

func merge(l []slog.Attr, a slog.Attr) []slog.Attr {
	for i := range l {
		if l[i].Key == a.Key {
			out := append(append([]slog.Attr(nil), l[:i]...), l[i+1:]...)
			return append(out, a)
		}
	}
	return append(l, a)
}

func (u *uniqueHandler) WithAttrs(as []slog.Attr) slog.Handler {
	attrs := append([]slog.Attr(nil), u.attrs...)
	for _, a := range as {
		attrs = merge(attrs, a)
	}
	return &uniqueHandler{base: u.base, attrs: attrs, h: u.base.WithAttrs(attrs)}
}

func (u *uniqueHandler) WithGroup(name string) slog.Handler {
	g := u.h.WithGroup(name)
	return &uniqueHandler{base: g, h: g}
}

// slogWriter forwards plugin host and plugin output into the node's log at
// the level each line carries: go-plugin and hclog write JSON lines
// ("@level", "@message") or text lines ("<timestamp> [LEVEL] name: msg");
// the timestamp is dropped (the node's log has its own) and the level
// mapped to slog's.
type slogWriter struct{ l *slog.Logger }

var hclogText = regexp.MustCompile(`^\S+\s+\[(TRACE|DEBUG|INFO|WARN|ERROR)\]\s*(.*)$`)

func (w *slogWriter) Write(p []byte) (int, error) {
	for _, line := range strings.Split(string(p), "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		var hl map[string]any
		if json.Unmarshal([]byte(line), &hl) == nil {
			msg, _ := hl["@message"].(string)
			lvl, _ := hl["@level"].(string)
			var attrs []any
			if mod, ok := hl["@module"].(string); ok && mod != "" {
				attrs = append(attrs, "module", mod)
			}
			for k, v := range hl {
				if !strings.HasPrefix(k, "@") {
					attrs = append(attrs, k, v)
				}
			}
			w.l.Log(context.Background(), hclogLevel(lvl), msg, attrs...)
			continue
		}
		if m := hclogText.FindStringSubmatch(line); m != nil {
			w.l.Log(context.Background(), hclogLevel(m[1]), m[2])
			continue
		}
		w.l.Info(line)
	}
	return len(p), nil
}

func hclogLevel(s string) slog.Level {
	switch strings.ToLower(s) {
	case "error":
		return slog.LevelError
	case "warn", "warning":
		return slog.LevelWarn
	case "info":
		return slog.LevelInfo
	}
	return slog.LevelDebug
}
