package host

import (
	"slices"
	"testing"
)

func TestPluginEnvFilter(t *testing.T) {
	in := []string{"PATH=/bin", "WRIT_GOSSIP_KEY=k", "WRIT_GOSSIP_KEY_FILE=/etc/writ/key", "LC_ALL=C", "WRIT_PLUGIN_X=1",
		"HOME=/h", "AWS_SECRET_ACCESS_KEY=s", "=weird", "NOEQUALS", "GOMAXPROCS=2", "WRITPLUGIN=no", "PATHX=no"}
	got := pluginEnv(in)
	want := []string{"PATH=/bin", "LC_ALL=C", "WRIT_PLUGIN_X=1", "HOME=/h", "GOMAXPROCS=2"}
	if !slices.Equal(got, want) {
		t.Fatalf("pluginEnv:\n got %q\nwant %q", got, want)
	}
}
