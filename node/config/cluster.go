package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/viper"
)

// Setting is one key of a cluster configuration document (the payload of
// the cluster.config entry: `version` plus `settings.<name>`).
type Setting struct {
	Name     string
	Kind     Kind
	Required bool
	// Reload: applied live on every node after activation; otherwise the
	// change is reported as "restart required".
	Reload bool
	// NodeKey is the writd key the setting overrides, if any; the setting
	// then takes its kind's bounds from that key (one table for both).
	NodeKey string
	// Min and Max bound a setting without a NodeKey (see Key.Min).
	Min, Max int64
	Help     string
}

// Bounds are the setting's range: its node key's when it overrides one.
func (st Setting) Bounds() (lo, hi int64) {
	if k, ok := keyByName(st.NodeKey); ok && st.NodeKey != "" {
		return k.Min, k.Max
	}
	return st.Min, st.Max
}

// ClusterType is the config-class entry type of writ's own cluster
// settings, present in every schema (declared by the schema, as the jobs
// schema does, or built in), and ClusterKey is where its activated document
// lives in the replicated state.
const (
	ClusterType = "cluster.config"
	ClusterKey  = "_config/cluster"
)

// Settings is every cluster-wide setting a config upgrade may change.
var Settings = []Setting{
	{Name: "commit_timeout", Kind: Duration, Required: true, NodeKey: "pipeline.commit_timeout", Help: "request commit timeout (applied at the next start)"},
	{Name: "heartbeat", Kind: Duration, Min: D(time.Millisecond), Max: D(10 * time.Second), Help: "raft heartbeat interval (applied at the next start)"},
	{Name: "max_batch", Kind: Int, Required: true, NodeKey: "pipeline.max_batch", Help: "most entries per proposal (applied at the next start)"},
	{Name: "max_inflight", Kind: Int, Reload: true, NodeKey: "pipeline.max_inflight", Help: "most requests in flight per node, enforced (beyond it requests are refused UNAVAILABLE \"overloaded\"); applied live"},
	{Name: "log_level", Kind: String, Required: true, Reload: true, NodeKey: "log.level", Help: "debug, info, warn or error"},
	{Name: "fact_retry", Kind: Duration, Min: D(time.Millisecond), Max: D(10 * time.Minute), Help: "first pause between fact re-proposals (applied at the next start)"},
	{Name: "dead_worker_grace", Kind: Duration, Reload: true, Min: 0, Max: D(24 * time.Hour), Help: "how long a dead worker's jobs wait before requeueing (read by the jobs handler from the committed configuration)"},
}

var (
	versionRe  = regexp.MustCompile(`^[0-9]{1,9}(\.[0-9]{1,9}){0,2}$`)
	durationRe = regexp.MustCompile(`^[0-9]{1,6}(ms|s|m|h)$`)
)

// Cluster is a validated cluster configuration document.
type Cluster struct {
	Version string
	// Settings holds the canonical value of every setting present.
	Settings map[string]string
}

// ParseCluster validates a cluster configuration document: YAML, TOML or
// JSON (format "" guesses) of the form
//
//	version: "2"
//	settings:
//	  commit_timeout: 3s
//	  max_batch: 256
//	  log_level: info
//
// Unknown keys, node-local keys and bad values are errors naming the key.
func ParseCluster(doc []byte, format string) (*Cluster, error) {
	if format == "" && bytes.HasPrefix(bytes.TrimSpace(doc), []byte("{")) {
		format = "json"
	}
	var fv *viper.Viper
	if format == "json" {
		fv = viper.New()
		fv.SetConfigType("json")
		if err := fv.ReadConfig(bytes.NewReader(doc)); err != nil {
			return nil, &Error{Key: "document", Msg: "cannot parse json: " + oneLine(err.Error()), Fix: "fix the syntax"}
		}
	} else {
		var err error
		if fv, err = parseDoc(doc, format, "document"); err != nil {
			return nil, err
		}
	}
	c := &Cluster{Settings: map[string]string{}}
	for _, key := range fv.AllKeys() {
		if key == "version" {
			continue
		}
		name, ok := strings.CutPrefix(key, "settings.")
		if _, known := settingByName(name); !ok || !known {
			if _, nodeKey := keyByName(key); nodeKey {
				return nil, &Error{Key: key, Source: "document", Msg: "is a node-local writd key and cannot change through a config upgrade", Fix: "set it in that node's writd configuration instead"}
			}
			return nil, &Error{Key: key, Source: "document", Msg: "unknown key", Fix: "use version and settings." + strings.Join(settingNames(), ", settings.")}
		}
	}
	v, err := scalar(fv.Get("version"))
	if err != nil || v == "" {
		return nil, &Error{Key: "version", Source: "document", Msg: "is required", Fix: `set version to a number such as "2" or "1.4.0" (quote it in YAML)`}
	}
	if !versionRe.MatchString(v) {
		return nil, &Error{Key: "version", Source: "document", Msg: fmt.Sprintf("%q is not a version", v), Fix: `use up to three dot-separated numbers such as "2" or "1.4.0"`}
	}
	c.Version = v
	for _, st := range Settings {
		key := "settings." + st.Name
		raw := fv.Get(key)
		if raw == nil {
			if st.Required {
				return nil, &Error{Key: key, Source: "document", Msg: "is required", Fix: "set " + key + " (" + st.Help + ")"}
			}
			continue
		}
		val, err := canonical(st, raw)
		if err != nil {
			return nil, &Error{Key: key, Source: "document", Msg: err.Error(), Fix: fixFor(st)}
		}
		c.Settings[st.Name] = val
	}
	return c, nil
}

func settingByName(n string) (Setting, bool) {
	for _, s := range Settings {
		if s.Name == n {
			return s, true
		}
	}
	return Setting{}, false
}

func settingNames() []string {
	var out []string
	for _, s := range Settings {
		out = append(out, s.Name)
	}
	return out
}

func scalar(v any) (string, error) {
	switch x := v.(type) {
	case nil:
		return "", nil
	case string:
		return strings.TrimSpace(x), nil
	case int, int64, int32, uint64, float64, bool:
		return fmt.Sprint(x), nil
	}
	return "", fmt.Errorf("%v is not a scalar", v)
}

func fixFor(st Setting) string {
	lo, hi := st.Bounds()
	switch st.Kind {
	case Duration:
		return fmt.Sprintf("write a whole number and one unit (ms, s, m or h) between %s and %s", FormatDuration(time.Duration(lo)), FormatDuration(time.Duration(hi)))
	case Int:
		return fmt.Sprintf("use a whole number between %d and %d", lo, hi)
	}
	if st.Name == "log_level" {
		return "use debug, info, warn or error"
	}
	return st.Help
}

func canonical(st Setting, raw any) (string, error) {
	s, err := scalar(raw)
	if err != nil {
		return "", err
	}
	switch st.Kind {
	case Duration:
		if !durationRe.MatchString(s) {
			return "", fmt.Errorf("%q is not a duration of the form <number><ms|s|m|h>", s)
		}
		d, err := time.ParseDuration(s)
		if err != nil {
			return "", fmt.Errorf("%q: %v", s, err)
		}
		if lo, hi := st.Bounds(); int64(d) < lo || int64(d) > hi {
			return "", fmt.Errorf("%s is out of range", s)
		}
		return s, nil
	case Int:
		i, err := strconv.Atoi(s)
		if err != nil {
			return "", fmt.Errorf("%q is not an integer", s)
		}
		if lo, hi := st.Bounds(); int64(i) < lo || int64(i) > hi {
			return "", fmt.Errorf("%d is out of range", i)
		}
		return strconv.Itoa(i), nil
	}
	if st.Name == "log_level" {
		switch s {
		case "debug", "info", "warn", "error":
		default:
			return "", fmt.Errorf("%q is not a level", s)
		}
	}
	return s, nil
}

// FormatDuration renders d in the document's duration form (largest exact
// unit among h, m, s, ms).
func FormatDuration(d time.Duration) string {
	switch {
	case d%time.Hour == 0 && d != 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d%time.Minute == 0 && d != 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	case d%time.Second == 0:
		return fmt.Sprintf("%ds", d/time.Second)
	}
	return fmt.Sprintf("%dms", d/time.Millisecond)
}

// ClusterOf returns the settings a node runs with before any upgrade
// activated (version "0").
func ClusterOf(n *Node) *Cluster {
	return &Cluster{Version: "0", Settings: map[string]string{
		"commit_timeout": FormatDuration(n.CommitTimeout),
		"max_batch":      strconv.Itoa(n.MaxBatch),
		"log_level":      n.LogLevel,
	}}
}

// Payload is the JSON payload of the cluster.config entry.
func (c *Cluster) Payload() []byte {
	settings := map[string]any{}
	for k, v := range c.Settings {
		if st, _ := settingByName(k); st.Kind == Int {
			i, _ := strconv.Atoi(v)
			settings[k] = i
		} else {
			settings[k] = v
		}
	}
	b, _ := json.Marshal(map[string]any{"version": c.Version, "settings": settings})
	return b
}

// Change is one differing setting.
type Change struct {
	Key      string
	Old, New string
	Reload   bool
}

// Diff lists what differs between old and new, version first, then settings
// in declaration order. A missing value shows as "".
func Diff(old, new *Cluster) []Change {
	var out []Change
	if old.Version != new.Version {
		out = append(out, Change{Key: "version", Old: old.Version, New: new.Version, Reload: true})
	}
	for _, st := range Settings {
		o, n := old.Settings[st.Name], new.Settings[st.Name]
		if o != n {
			out = append(out, Change{Key: "settings." + st.Name, Old: o, New: n, Reload: st.Reload})
		}
	}
	return out
}

// ApplyAll returns a copy of n with every setting of c that writd uses
// applied: what a node starts with after a configuration activated.
func ApplyAll(n *Node, c *Cluster) *Node {
	cp := *n
	for k, v := range c.Settings {
		switch k {
		case "commit_timeout":
			cp.CommitTimeout, _ = time.ParseDuration(v)
		case "max_batch":
			cp.MaxBatch, _ = strconv.Atoi(v)
		case "max_inflight":
			cp.MaxInflight, _ = strconv.Atoi(v)
		case "log_level":
			cp.LogLevel = v
		case "fact_retry":
			cp.FactRetry, _ = time.ParseDuration(v)
		case "heartbeat":
			hb, _ := time.ParseDuration(v)
			ticks := int((hb + cp.RaftTick - 1) / cp.RaftTick)
			cp.HeartbeatTicks = max(1, min(ticks, cp.ElectionTicks-1))
		}
	}
	return &cp
}

// Apply returns a copy of n with c's live-reloadable settings applied, and
// the settings that differ but take effect only at the next start.
func Apply(n *Node, c *Cluster) (*Node, []string) {
	cp := *n
	var restart []string
	for _, ch := range Diff(ClusterOf(n), c) {
		if ch.Key == "version" || ch.New == "" {
			continue
		}
		if !ch.Reload {
			restart = append(restart, ch.Key)
			continue
		}
		switch ch.Key {
		case "settings.log_level":
			cp.LogLevel = ch.New
		case "settings.max_inflight":
			cp.MaxInflight, _ = strconv.Atoi(ch.New)
		}
	}
	sort.Strings(restart)
	return &cp, restart
}
