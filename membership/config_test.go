package membership

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/serf/serf"
)

func TestConfig_ValidateNamesFieldAndFix(t *testing.T) {
	cases := []struct {
		name string
		mod  func(*Config)
		want string
	}{
		{"empty node id", func(c *Config) { c.NodeID = "" }, "node_id"},
		{"node id with space", func(c *Config) { c.NodeID = "a b" }, "node_id"},
		{"bind addr not ip", func(c *Config) { c.BindAddr = "localhost" }, "bind_addr"},
		{"bind port range", func(c *Config) { c.BindPort = 70000 }, "bind_port"},
		{"seed without port", func(c *Config) { c.Seeds = []string{"10.0.0.1"} }, "seeds[0]"},
		{"no raft addr", func(c *Config) { c.RaftAddr = "" }, "raft_addr"},
		{"no fingerprint", func(c *Config) { c.Fingerprint = "" }, "fingerprint"},
		{"bad role", func(c *Config) { c.Role = "boss" }, "role"},
		{"bad profile", func(c *Config) { c.Profile = "wan" }, "profile"},
		{"negative max voters", func(c *Config) { c.MaxVoters = -1 }, "max_voters"},
		{"key not base64", func(c *Config) { c.EncryptKey = "!!" }, "encrypt_key"},
		{"key wrong length", func(c *Config) { c.EncryptKey = "c2hvcnQ=" }, "encrypt_key"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig("n1", "127.0.2.30")
			tc.mod(&cfg)
			err := cfg.Validate()
			if err == nil {
				t.Fatal("Validate accepted a bad config")
			}
			if !strings.Contains(err.Error(), "membership: config "+tc.want) {
				t.Fatalf("error %q does not name %s", err, tc.want)
			}
			if _, serr := Start(cfg, nil); serr == nil || serr.Error() != err.Error() {
				t.Fatalf("Start error %v, want the Validate error", serr)
			}
		})
	}
	good := testConfig("n1", "127.0.2.30")
	if err := good.Validate(); err != nil {
		t.Fatalf("good config rejected: %v", err)
	}
}

// tagsOfSize returns a config whose encoded tags are exactly n bytes.
func tagsOfSize(t *testing.T, n int) Config {
	t.Helper()
	cfg := testConfig("n1", "127.0.2.30")
	cfg.Fingerprint = ""
	d0 := cfg.withDefaults()
	base := EncodedTagSize(d0.tags())
	for l := n - base - 3; l <= n; l++ {
		if l < 1 {
			continue
		}
		cfg.Fingerprint = strings.Repeat("f", l)
		c := cfg.withDefaults()
		if EncodedTagSize(c.tags()) == n {
			return cfg
		}
	}
	t.Fatalf("could not build tags of %d bytes", n)
	return cfg
}

func TestConfig_TagLimitMatchesSerf(t *testing.T) {
	at := tagsOfSize(t, MaxTagBytes)
	if err := at.Validate(); err != nil {
		t.Fatalf("tags of exactly %d bytes rejected: %v", MaxTagBytes, err)
	}
	over := tagsOfSize(t, MaxTagBytes+1)
	err := over.Validate()
	if err == nil || !strings.Contains(err.Error(), "512-byte limit") || !strings.Contains(err.Error(), "fp=") {
		t.Fatalf("oversized tags: error %v, want the limit and per-tag sizes", err)
	}
	// serf itself agrees on both sides of the limit.
	for _, tc := range []struct {
		cfg Config
		ok  bool
	}{{at, true}, {over, false}} {
		c := tc.cfg.withDefaults()
		sc := serf.DefaultConfig()
		sc.NodeName = c.NodeID
		sc.Tags = c.tags()
		sc.MemberlistConfig.BindAddr = "127.0.2.30"
		sc.MemberlistConfig.BindPort = 0
		sc.LogOutput = &logSink{}
		sc.MemberlistConfig.LogOutput = &logSink{}
		s, err := serf.Create(sc)
		if s != nil {
			_ = s.Shutdown()
		}
		if (err == nil) != tc.ok {
			t.Fatalf("serf.Create with %d-byte tags: err %v, want ok=%v", EncodedTagSize(c.tags()), err, tc.ok)
		}
	}
}

func TestConfig_KeyringFile(t *testing.T) {
	key := "3wVf3rSAVxd8QZ2Mj0+sDuO3L7/LO+mq0A1d+KfTgj0="
	dir := t.TempDir()

	// Missing file + key: created with the key.
	cfg := testConfig("n1", "127.0.2.30")
	cfg.EncryptKey = key
	cfg.KeyringFile = filepath.Join(dir, "new", "keyring.json")
	kr, err := loadKeyring(&cfg)
	if err != nil || kr == nil {
		t.Fatalf("loadKeyring: %v", err)
	}
	data, err := os.ReadFile(cfg.KeyringFile)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	if err := json.Unmarshal(data, &keys); err != nil || len(keys) != 1 || keys[0] != key {
		t.Fatalf("keyring file %s: %v", data, err)
	}

	bad := []struct{ name, content, key, want string }{
		{"missing without key", "", "", "does not exist and encrypt_key is empty"},
		{"not json", "nope", "", "JSON array of base64 keys"},
		{"empty", "[]", "", "holds no keys"},
		{"bad key", `["c2hvcnQ="]`, "", "key 0"},
		{"key not in file", `["Oc5cMKPixUXkV5rK9a3vQ3FJUqsZ6tV1Qk1mD6m3Y2o="]`, key, "encrypt_key is not in keyring_file"},
	}
	for i, tc := range bad {
		c := testConfig("n1", "127.0.2.30")
		c.EncryptKey = tc.key
		c.KeyringFile = filepath.Join(dir, "k"+string(rune('a'+i)))
		if tc.content != "" {
			if err := os.WriteFile(c.KeyringFile, []byte(tc.content), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := loadKeyring(&c); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
}

func TestAgent_KeyOpsWithoutEncryption(t *testing.T) {
	a := startAgent(t, testConfig("plain", "127.0.2.31"), nil)
	if _, err := a.ListKeys(); !errors.Is(err, ErrNotEncrypted) {
		t.Fatalf("ListKeys on a plaintext agent: %v, want ErrNotEncrypted", err)
	}
}
