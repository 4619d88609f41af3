package config

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// clusterDoc is a valid cluster document with one setting replaced.
func clusterDoc(name, value string) []byte {
	set := map[string]string{"commit_timeout": "5s", "max_batch": "256", "log_level": "info"}
	set[name] = value
	var b strings.Builder
	b.WriteString("version: \"2\"\nsettings:\n")
	for k, v := range set {
		fmt.Fprintf(&b, "  %s: %s\n", k, v)
	}
	return []byte(b.String())
}

// TestClusterSettingsShareNodeRanges: a cluster setting that overrides a
// writd key accepts exactly the values writd accepts for that key (one
// table). The values from the issue: commit_timeout 1ms and 1h are refused
// by both.
func TestClusterSettingsShareNodeRanges(t *testing.T) {
	for _, v := range []string{"1ms", "1h", "9ms", "11m"} {
		if _, err := ParseCluster(clusterDoc("commit_timeout", v), "yaml"); err == nil || !strings.Contains(err.Error(), "settings.commit_timeout") || !strings.Contains(err.Error(), "between 10ms and 10m") {
			t.Errorf("commit_timeout %s: %v", v, err)
		}
		if _, err := Load(Options{Env: []string{"WRIT_PIPELINE_COMMIT_TIMEOUT=" + v}}); err == nil {
			t.Errorf("writd accepted pipeline.commit_timeout %s", v)
		}
	}
	units := []struct {
		suffix string
		d      time.Duration
	}{{"ms", time.Millisecond}, {"s", time.Second}, {"m", time.Minute}, {"h", time.Hour}}
	rapid.Check(t, func(t *rapid.T) {
		var st Setting
		for {
			st = rapid.SampledFrom(Settings).Draw(t, "setting")
			if st.NodeKey != "" && st.Kind != String {
				break
			}
		}
		k, _ := keyByName(st.NodeKey)
		var value string
		switch st.Kind {
		case Duration:
			u := rapid.SampledFrom(units).Draw(t, "unit")
			// around the bounds and anywhere in between
			lo, hi := time.Duration(k.Min)/u.d, time.Duration(k.Max)/u.d
			n := rapid.Int64Range(int64(max(0, lo-3)), int64(min(hi+3, 999_999))).Draw(t, "n")
			value = fmt.Sprintf("%d%s", n, u.suffix)
		case Int:
			value = fmt.Sprint(rapid.Int64Range(k.Min-3, k.Max+3).Draw(t, "n"))
		}
		_, cerr := ParseCluster(clusterDoc(st.Name, value), "yaml")
		_, nerr := Load(Options{Env: []string{k.Env() + "=" + value}})
		if (cerr == nil) != (nerr == nil) {
			t.Fatalf("%s=%s: cluster setting says %v, writd key %s says %v", st.Name, value, cerr, k.Name, nerr)
		}
	})
}

// TestEveryRangedKeyHasBounds: every Int and Duration key and setting has a
// non-empty range.
func TestEveryRangedKeyHasBounds(t *testing.T) {
	for _, k := range Keys {
		if (k.Kind == Int || k.Kind == Duration) && k.Max <= k.Min {
			t.Errorf("key %s has no range", k.Name)
		}
	}
	for _, st := range Settings {
		if lo, hi := st.Bounds(); (st.Kind == Int || st.Kind == Duration) && hi <= lo {
			t.Errorf("setting %s has no range", st.Name)
		}
	}
}
