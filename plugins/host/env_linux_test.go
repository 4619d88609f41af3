//go:build linux

package host_test

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"
)

// TestPluginEnvironmentIsAllowListed starts a real plugin process from a
// node whose environment holds secrets and reads the plugin's environment
// from /proc/<pid>/environ: no secret reaches it, the allow-listed
// variables and WRIT_PLUGIN_* do.
func TestPluginEnvironmentIsAllowListed(t *testing.T) {
	const secret = "c2VjcmV0LWdvc3NpcC1rZXktbWF0ZXJpYWwtMzJieXQ="
	t.Setenv("WRIT_GOSSIP_KEY", secret)
	t.Setenv("WRIT_API_TOKEN", "token-"+secret)
	t.Setenv("AWS_SECRET_ACCESS_KEY", "aws-"+secret)
	t.Setenv("WRIT_PLUGIN_MODE", "passed")
	t.Setenv("TZ", "UTC")
	h := start(t, "ok")
	pid := h.Status()[0].PID
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		t.Fatalf("plugin %d environment: %v", pid, err)
	}
	env := map[string]string{}
	var names []string
	for _, kv := range strings.Split(string(raw), "\x00") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
			names = append(names, k)
		}
	}
	if bytes.Contains(raw, []byte(secret)) {
		t.Fatalf("plugin %d environment holds the node's secret (variables: %v)", pid, names)
	}
	for _, k := range []string{"WRIT_GOSSIP_KEY", "WRIT_API_TOKEN", "AWS_SECRET_ACCESS_KEY"} {
		if _, ok := env[k]; ok {
			t.Errorf("plugin inherited %s", k)
		}
	}
	if env["WRIT_PLUGIN_MODE"] != "passed" || env["TZ"] != "UTC" || env["PATH"] != os.Getenv("PATH") {
		t.Errorf("plugin environment lacks allow-listed variables (WRIT_PLUGIN_MODE, TZ, PATH): %v", names)
	}
	if env["PLUGIN_PROTOCOL_VERSIONS"] == "" {
		t.Errorf("plugin environment lacks go-plugin's handshake variables: %v", names)
	}
}
