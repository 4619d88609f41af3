package node

import (
	"errors"
	"strings"
	"testing"

	"github.com/writ-dev/writ/cmd/writd/testdata/lease/leasegen"
	"github.com/writ-dev/writ/examples/jobs/jobsgen"
	"github.com/writ-dev/writ/node/config"
	"github.com/writ-dev/writ/schema/ir"
)

// TestBuiltinClusterConfig: a schema without cluster.config gets writ's
// built-in one, validated by node/config's table, without changing the
// schema's fingerprint; a schema that declares it keeps its own.
func TestBuiltinClusterConfig(t *testing.T) {
	jobs := jobsgen.Catalog()
	if withClusterConfig(jobs) != jobs {
		t.Fatal("the jobs schema declares cluster.config; its catalog must be used as is")
	}
	lease := leasegen.Catalog()
	if _, ok := lease.Type(config.ClusterType); ok {
		t.Fatal("test premise: the lease schema declares no cluster.config")
	}
	cat := withClusterConfig(lease)
	if cat.Fingerprint() != lease.Fingerprint() {
		t.Fatal("the built-in type changed the schema fingerprint")
	}
	d, ok := cat.Type(config.ClusterType)
	if !ok || d.Class != ir.ClassConfig {
		t.Fatalf("built-in cluster.config: %+v %v", d, ok)
	}
	if n, ok := cat.TypeByNumber(d.Number); !ok || n != d {
		t.Fatal("TypeByNumber does not find the built-in type")
	}
	if ts := cat.Types(); len(ts) != len(lease.Types())+1 || ts[len(ts)-1] != d {
		t.Fatalf("Types: %d, want %d", len(ts), len(lease.Types())+1)
	}
	p, err := d.ParseJSON([]byte(`{"version":"3","settings":{"commit_timeout":"2s","max_batch":8,"log_level":"warn"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if k := p.Keys(); len(k) != 1 || k[0] != config.ClusterKey || configKey(d) != config.ClusterKey {
		t.Fatalf("keys %v", k)
	}
	for doc, field := range map[string]string{
		`{"version":"3","settings":{"commit_timeout":"1ms","max_batch":8,"log_level":"warn"}}`: "settings.commit_timeout",
		`{"version":"3","settings":{"commit_timeout":"1h","max_batch":8,"log_level":"warn"}}`:  "settings.commit_timeout",
		`{"version":"3","settings":{"commit_timeout":"2s","max_batch":0,"log_level":"warn"}}`:  "settings.max_batch",
		`{"version":"3","settings":{"commit_timeout":"2s","max_batch":8,"colour":"red"}}`:      "settings.colour",
	} {
		_, err := d.ParseJSON([]byte(doc))
		var fe *ir.FieldError
		if !errors.As(err, &fe) || fe.Field != field || fe.Type != config.ClusterType {
			t.Errorf("%s: %v, want a field error on %s", doc, err, field)
		}
	}
}

// TestConfigTypeResolution: the default is the schema's only config type,
// cluster.config when it declares none; unknown and non-config types are
// named with the choices.
func TestConfigTypeResolution(t *testing.T) {
	lease := &Node{cat: withClusterConfig(leasegen.Catalog())}
	jobs := &Node{cat: withClusterConfig(jobsgen.Catalog())}
	for _, c := range []struct {
		n        *Node
		typ      string
		want     string
		wantErrs []string
	}{
		{lease, "", "lease.config", nil},
		{lease, "cluster.config", "cluster.config", nil},
		{jobs, "", "cluster.config", nil},
		{lease, "lease.acquire", "", []string{`"lease.acquire" is class request`, "lease.config, cluster.config"}},
		{lease, "nope.config", "", []string{`"nope.config" is not declared`}},
	} {
		d, err := c.n.configType(c.typ)
		if c.wantErrs == nil {
			if err != nil || d.Name != c.want {
				t.Errorf("configType(%q) = %v, %v; want %s", c.typ, d, err, c.want)
			}
			continue
		}
		if err == nil {
			t.Errorf("configType(%q) accepted", c.typ)
			continue
		}
		for _, w := range c.wantErrs {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("configType(%q): %q lacks %q", c.typ, err, w)
			}
		}
	}
}

func TestCompareVersions(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
		ok   bool
	}{{"2", "10", -1, true}, {"2.1", "2", 1, true}, {"1.4.0", "1.4", 0, true}, {"3", "3", 0, true}, {"x", "1", 0, false}} {
		got, ok := config.CompareVersions(c.a, c.b)
		if got != c.want || ok != c.ok {
			t.Errorf("CompareVersions(%q, %q) = %d, %v", c.a, c.b, got, ok)
		}
	}
}
