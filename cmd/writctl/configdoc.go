package main

import (
	"encoding/json"
	"fmt"
	"sort"

	"github.com/writ-dev/writ/node/config"
)

// versionField is the document's "version" (string or number), or "".
func versionField(doc []byte) string {
	var v struct {
		Version any `json:"version"`
	}
	if json.Unmarshal(doc, &v) != nil || v.Version == nil {
		return ""
	}
	switch x := v.Version.(type) {
	case string:
		return x
	case float64:
		return fmt.Sprint(x)
	}
	return ""
}

// docDiff lists the leaves that differ between two JSON documents of a
// schema config type, by dotted path, sorted. The schema's handlers read
// the document when they run, so every change is live.
func docDiff(old, new []byte) []config.Change {
	a, b := map[string]string{}, map[string]string{}
	flatten("", decode(old), a)
	flatten("", decode(new), b)
	keys := map[string]bool{}
	for k := range a {
		keys[k] = true
	}
	for k := range b {
		keys[k] = true
	}
	var out []config.Change
	for k := range keys {
		if a[k] != b[k] {
			out = append(out, config.Change{Key: k, Old: a[k], New: b[k], Reload: true})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

func decode(doc []byte) any {
	var v any
	if len(doc) > 0 {
		_ = json.Unmarshal(doc, &v)
	}
	return v
}

func flatten(prefix string, v any, out map[string]string) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			p := k
			if prefix != "" {
				p = prefix + "." + k
			}
			flatten(p, e, out)
		}
	case nil:
	case string:
		out[prefix] = x
	default:
		b, _ := json.Marshal(x)
		out[prefix] = string(b)
	}
}
