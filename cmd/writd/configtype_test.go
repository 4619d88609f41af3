package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/api/writv1"
)

// TestCluster_UserConfigType: on three real writd processes running the
// lease schema, the schema's own config type (lease.config) is staged and
// activated through `writctl config upgrade` (the default type, as the
// schema's only one), its active document is what the plugin enforces,
// it appears on watch under its type, a lower version is refused unless
// --force, and writ's own settings (the built-in cluster.config, which the
// lease schema does not declare) are validated with writd's ranges and
// activate on every node.
func TestCluster_UserConfigType(t *testing.T) {
	bin := buildBinaries(t)
	schema, err := filepath.Abs(leaseSchema)
	if err != nil {
		t.Fatal(err)
	}
	c := newClusterArgs(t, []string{"--schema", schema, "--plugin", pinned(t, filepath.Join(bin, "writ-lease")), "--membership-profile", "local"},
		"127.0.16.4", "127.0.16.5", "127.0.16.6")
	n1, n2, n3 := c.nodes[0], c.nodes[1], c.nodes[2]
	dir := t.TempDir()
	file := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ctl := func(p *proc, want int, args ...string) string {
		t.Helper()
		out, code := writctl(t, bin, append([]string{"--addr", p.api()}, args...)...)
		if code != want {
			t.Fatalf("writctl %v: exit %d, want %d:\n%s", args, code, want, out)
		}
		return out
	}
	if out := ctl(n1, 0, "config", "show"); !strings.Contains(out, "lease.config: no configuration of this type has activated") {
		t.Fatalf("config show before any upgrade: %s", out)
	}
	ctl(n2, 0, "submit", "lease.acquire", `{"lease_id":"a","holder":"h1","ttl_ms":5000}`)

	v2 := file("policy-2.yaml", "version: \"2\"\nsettings:\n  max_ttl_ms: 1000\n")
	out := ctl(n2, 0, "config", "upgrade", "--file", v2)
	if !strings.Contains(out, "lease.config") || !strings.Contains(out, "settings.max_ttl_ms") || !strings.Contains(out, "ACTIVATED") {
		t.Fatalf("lease.config upgrade: %s", out)
	}
	// the plugin reads the active document
	out = ctl(n3, exitRejected, "submit", "lease.acquire", `{"lease_id":"b","holder":"h2","ttl_ms":5000}`)
	if !strings.Contains(out, "exceeds max_ttl_ms 1000 of lease policy 2") {
		t.Fatalf("the plugin did not see the active lease.config: %s", out)
	}
	ctl(n3, 0, "submit", "lease.acquire", `{"lease_id":"b","holder":"h2","ttl_ms":900}`)
	if out := ctl(n3, 0, "config", "show", "--type", "lease.config"); !strings.Contains(out, `lease.config tag "2"`) || !strings.Contains(out, `"max_ttl_ms":1000`) {
		t.Fatalf("config show --type lease.config: %s", out)
	}
	// on watch, under its own type
	out = ctl(n1, 0, "watch", "--from", "1", "--type", "lease.config", "--count", "2", "--for", "10s")
	if !strings.Contains(out, "lease.config") || !strings.Contains(out, ":stage") || !strings.Contains(out, ":activate") {
		t.Fatalf("watch --type lease.config: %q", out)
	}
	// a user config change is not writ's settings: the nodes' tag stays
	for _, p := range c.nodes {
		if st, err := c.status(p); err != nil || st.ConfigTag != "0" {
			t.Fatalf("%s config tag after a lease.config upgrade: %v %v", p.name, st, err)
		}
	}

	// backwards only on purpose
	v1 := file("policy-1.yaml", "version: \"1\"\nsettings:\n  max_ttl_ms: 200\n")
	if out := ctl(n1, exitRejected, "config", "upgrade", "--file", v1); !strings.Contains(out, `version "1" is lower than the active "2"`) || !strings.Contains(out, "--force") {
		t.Fatalf("backwards upgrade: %s", out)
	}
	// the node refuses it too, whoever the client is
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	st, err := n3.client.ConfigUpgrade(ctx, &writv1.ConfigUpgradeRequest{Type: "lease.config", Document: []byte(`{"version":"1.9","settings":{"max_ttl_ms":300}}`), Format: "json"})
	if err == nil {
		_, err = st.Recv()
	}
	cancel()
	if d, ok := api.OutcomeFromError(err); !ok || d.Outcome != writv1.Outcome_REJECTED || !strings.Contains(d.Reason, "lower than the active") {
		t.Fatalf("node accepted a backwards lease.config over the API: %v", err)
	}
	ctl(n1, 0, "config", "upgrade", "--file", v1, "--force")
	if out := ctl(n2, exitRejected, "submit", "lease.acquire", `{"lease_id":"c","holder":"h3","ttl_ms":900}`); !strings.Contains(out, "exceeds max_ttl_ms 200") {
		t.Fatalf("after the forced rollback: %s", out)
	}
	// the schema validates its own config type; unknown types are named
	if out := ctl(n1, exitRejected, "config", "upgrade", "--file", file("bad.yaml", "version: \"3\"\nsettings:\n  max_ttl_ms: 50\n")); !strings.Contains(out, "max_ttl_ms") || !strings.Contains(out, ">= 100") {
		t.Fatalf("out-of-range lease.config: %s", out)
	}
	if out := ctl(n1, exitUsage, "config", "upgrade", "--type", "lease.acquire", "--file", v2); !strings.Contains(out, `"lease.acquire" is class request`) {
		t.Fatalf("upgrade of a request type: %s", out)
	}

	// writ's own settings: one table with writd's flags
	bad := file("cluster-bad.yaml", "version: \"2\"\nsettings:\n  commit_timeout: 1ms\n  max_batch: 64\n  log_level: debug\n")
	if out := ctl(n1, exitUsage, "config", "upgrade", "--type", "cluster.config", "--file", bad); !strings.Contains(out, "settings.commit_timeout") || !strings.Contains(out, "between 10ms and 10m") {
		t.Fatalf("commit_timeout 1ms: %s", out)
	}
	good := file("cluster.yaml", "version: \"2\"\nsettings:\n  commit_timeout: 4s\n  max_batch: 64\n  log_level: debug\n")
	if out := ctl(n3, 0, "config", "upgrade", "--type", "cluster.config", "--file", good); !strings.Contains(out, "RELOADED") {
		t.Fatalf("cluster.config upgrade: %s", out)
	}
	for _, p := range c.nodes {
		if st, err := c.status(p); err != nil || st.ConfigTag != "2" {
			t.Fatalf("%s config tag after the cluster.config upgrade: %v %v", p.name, st, err)
		}
	}
	if out := ctl(n2, 0, "config", "show", "--type", "cluster.config"); !strings.Contains(out, `cluster.config tag "2" (activated`) {
		t.Fatalf("config show --type cluster.config: %s", out)
	}
	// and the lease policy is untouched by it
	if out := ctl(n2, 0, "config", "show"); !strings.Contains(out, `lease.config tag "1"`) {
		t.Fatalf("lease.config after the cluster.config upgrade: %s", out)
	}
	c.converge(30 * time.Second)
}
