package membership

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/memberlist"
)

// Tag names carried by every writ serf member.
const (
	TagID          = "id"
	TagRaftAddr    = "raft"
	TagAPIAddr     = "api"
	TagFingerprint = "fp"
	TagVersion     = "ver"
	TagRole        = "role"
	// TagIncarnation is the incarnation of the node's raft data directory
	// (16 hex digits; absent: unknown): a node rebuilt under the same ID
	// announces a new one.
	TagIncarnation = "inc"
)

// Roles a node may announce in its role tag.
const (
	// RoleVoter nodes join as learners and are promoted to voters once caught
	// up (subject to Config.MaxVoters).
	RoleVoter = "voter"
	// RoleLearner nodes are admitted as learners and never promoted.
	RoleLearner = "learner"
)

// MaxTagBytes is serf's limit on the encoded tag set of one member.
const MaxTagBytes = memberlist.MetaMaxSize

// Timing profiles.
const (
	// ProfileLAN is memberlist's LAN default: a hard-killed node is declared
	// failed after roughly 5–6 s.
	ProfileLAN = "lan"
	// ProfileLocal is tuned for loopback and single-rack test clusters: a
	// hard-killed node is declared failed in about a second.
	ProfileLocal = "local"
)

// ErrDuplicateID is returned (wrapped) when another live member already uses
// this node's ID.
var ErrDuplicateID = errors.New("membership: duplicate node id")

// Config configures one node's serf agent and reconciler.
type Config struct {
	// NodeID is this node's unique ID; it is the serf node name and the raft
	// member ID. Required.
	NodeID string
	// BindAddr is the IP address gossip listens on (UDP and TCP). Required.
	BindAddr string
	// BindPort is the gossip port; 0 lets the kernel choose (see Agent.Addr).
	BindPort int
	// AdvertiseAddr/AdvertisePort override what other nodes dial; default
	// BindAddr and the bound port.
	AdvertiseAddr string
	AdvertisePort int

	// Seeds are host:port gossip addresses of existing members. Empty means
	// this node starts a new gossip pool on its own.
	Seeds []string
	// JoinAttempts is how many times every seed is tried before Start gives
	// up (default 3); JoinRetryInterval is the pause between attempts
	// (default 1s).
	JoinAttempts      int
	JoinRetryInterval time.Duration

	// RaftAddr, APIAddr, Fingerprint, Version and Role are announced as tags.
	// RaftAddr and Fingerprint are required; Role defaults to RoleVoter.
	RaftAddr    string
	APIAddr     string
	Fingerprint string
	Version     string
	Role        string
	// Incarnation is announced in the inc tag (0: none). Start takes it
	// from the Voters when they implement IncarnationVoters and it is 0.
	Incarnation uint64

	// Profile selects failure-detection timings: ProfileLAN (default) or
	// ProfileLocal.
	Profile string

	// EncryptKey is a base64 gossip key of 16, 24 or 32 bytes. KeyringFile
	// is a JSON array of base64 keys, the first one primary; when it is set
	// key rotations are persisted to it. If KeyringFile names a file that
	// does not exist yet and EncryptKey is set, the file is created holding
	// EncryptKey. With neither, gossip is not encrypted.
	EncryptKey  string
	KeyringFile string

	// SnapshotPath, if set, lets serf remember the members it saw so that a
	// restarted node rejoins them even if its seeds are gone.
	SnapshotPath string

	// FailedGrace is how long a failed member stays in the raft
	// configuration before the leader removes it (default 30s).
	FailedGrace time.Duration
	// ReconcileInterval is the periodic reconcile tick (default 2s).
	ReconcileInterval time.Duration
	// ChangeTimeout bounds one configuration change (default 10s).
	ChangeTimeout time.Duration
	// PromoteLag is how many entries a learner may trail the leader's commit
	// index and still count as caught up (default 16).
	PromoteLag uint64
	// MaxVoters caps the number of voters; further nodes stay learners.
	// 0 means no cap.
	MaxVoters int
	// ManualPromote stops the leader from promoting caught-up learners on
	// its own (membership.auto_promote: false): a joined node stays a
	// learner until an operator calls Agent.Promote.
	ManualPromote bool
	// Compatible decides whether a node with fingerprint remote may join a
	// cluster running local. nil means the fingerprints must be equal.
	Compatible func(local, remote string) error
	// Admit, if set, replaces Compatible: it judges a node's schema against
	// the rest of the raft configuration (see Candidate). It is called for
	// new nodes and for members restarted with another schema.
	Admit AdmitFunc

	// Logger receives membership and gossip logs; nil discards them.
	Logger *slog.Logger
}

var nodeIDRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

func (c *Config) withDefaults() Config {
	out := *c
	if out.JoinAttempts <= 0 {
		out.JoinAttempts = 3
	}
	if out.JoinRetryInterval <= 0 {
		out.JoinRetryInterval = time.Second
	}
	if out.Role == "" {
		out.Role = RoleVoter
	}
	if out.Profile == "" {
		out.Profile = ProfileLAN
	}
	if out.FailedGrace <= 0 {
		out.FailedGrace = 30 * time.Second
	}
	if out.ReconcileInterval <= 0 {
		out.ReconcileInterval = 2 * time.Second
	}
	if out.ChangeTimeout <= 0 {
		out.ChangeTimeout = 10 * time.Second
	}
	if out.PromoteLag == 0 {
		out.PromoteLag = 16
	}
	if out.Compatible == nil {
		out.Compatible = EqualFingerprints
	}
	if out.Logger == nil {
		out.Logger = slog.New(slog.DiscardHandler)
	}
	return out
}

// EqualFingerprints is the default compatibility rule: schemas must match
// exactly.
func EqualFingerprints(local, remote string) error {
	if local != remote {
		return fmt.Errorf("schema fingerprint %q differs from the cluster's %q", remote, local)
	}
	return nil
}

// Validate checks the configuration and returns an error naming the field
// and the fix. Start calls it.
func (c *Config) Validate() error {
	cfg := c.withDefaults()
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("membership: config %s: %s", field, fmt.Sprintf(format, args...)))
	}
	if !nodeIDRe.MatchString(cfg.NodeID) {
		bad("node_id", "%q is not a valid node ID: use 1-128 letters, digits, '.', '_' or '-', starting with a letter or digit", cfg.NodeID)
	}
	if net.ParseIP(cfg.BindAddr) == nil {
		bad("bind_addr", "%q is not an IP address: set the address gossip should listen on, e.g. 10.0.0.5", cfg.BindAddr)
	}
	if cfg.BindPort < 0 || cfg.BindPort > 65535 {
		bad("bind_port", "%d is out of range 0-65535", cfg.BindPort)
	}
	if cfg.AdvertiseAddr != "" && net.ParseIP(cfg.AdvertiseAddr) == nil {
		bad("advertise_addr", "%q is not an IP address", cfg.AdvertiseAddr)
	}
	if cfg.AdvertisePort < 0 || cfg.AdvertisePort > 65535 {
		bad("advertise_port", "%d is out of range 0-65535", cfg.AdvertisePort)
	}
	for i, s := range cfg.Seeds {
		if _, _, err := net.SplitHostPort(s); err != nil {
			bad(fmt.Sprintf("seeds[%d]", i), "%q is not host:port: %v", s, err)
		}
	}
	if cfg.RaftAddr == "" {
		bad("raft_addr", "is empty: set the address peers use for raft traffic")
	} else if _, _, err := net.SplitHostPort(cfg.RaftAddr); err != nil {
		bad("raft_addr", "%q is not host:port: %v", cfg.RaftAddr, err)
	}
	if cfg.Fingerprint == "" {
		bad("fingerprint", "is empty: pass the loaded schema's fingerprint")
	}
	if cfg.Role != RoleVoter && cfg.Role != RoleLearner {
		bad("role", "%q is unknown: use %q or %q", cfg.Role, RoleVoter, RoleLearner)
	}
	if cfg.Profile != ProfileLAN && cfg.Profile != ProfileLocal {
		bad("profile", "%q is unknown: use %q or %q", cfg.Profile, ProfileLAN, ProfileLocal)
	}
	if cfg.MaxVoters < 0 {
		bad("max_voters", "%d is negative: use 0 for no cap", cfg.MaxVoters)
	}
	if cfg.EncryptKey != "" {
		if _, err := DecodeKey(cfg.EncryptKey); err != nil {
			bad("encrypt_key", "%v", err)
		}
	}
	if err := checkTagSize(cfg.tags()); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func (c Config) tags() map[string]string {
	t := map[string]string{
		TagID:          c.NodeID,
		TagRaftAddr:    c.RaftAddr,
		TagFingerprint: c.Fingerprint,
		TagRole:        c.Role,
	}
	if c.APIAddr != "" {
		t[TagAPIAddr] = c.APIAddr
	}
	if c.Version != "" {
		t[TagVersion] = c.Version
	}
	if c.Incarnation != 0 {
		t[TagIncarnation] = formatIncarnation(c.Incarnation)
	}
	return t
}

func formatIncarnation(inc uint64) string { return fmt.Sprintf("%016x", inc) }

// tagIncarnation parses a member's inc tag: 0 when it has none, an error
// when it is malformed.
func tagIncarnation(tags map[string]string) (uint64, error) {
	s, ok := tags[TagIncarnation]
	if !ok {
		return 0, nil
	}
	v, err := strconv.ParseUint(s, 16, 64)
	if err != nil || v == 0 || len(s) != 16 {
		return 0, fmt.Errorf("tag %q is %q, not 16 hex digits naming a non-zero incarnation", TagIncarnation, s)
	}
	return v, nil
}

// EncodedTagSize is the size serf gives tags on the wire (a magic byte plus
// their msgpack encoding); it must not exceed MaxTagBytes.
func EncodedTagSize(tags map[string]string) int {
	var buf bytes.Buffer
	buf.WriteByte(0xff)
	if err := codec.NewEncoder(&buf, &codec.MsgpackHandle{}).Encode(tags); err != nil {
		// A map[string]string always encodes; treat a failure as oversized.
		return MaxTagBytes + 1
	}
	return buf.Len()
}

func checkTagSize(tags map[string]string) error {
	n := EncodedTagSize(tags)
	if n <= MaxTagBytes {
		return nil
	}
	keys := make([]string, 0, len(tags))
	for k := range tags {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%d bytes", k, len(tags[k])))
	}
	return fmt.Errorf("membership: config tags: encoded tags are %d bytes, over serf's %d-byte limit (%s): shorten the node ID, addresses, version or fingerprint",
		n, MaxTagBytes, strings.Join(parts, ", "))
}

// DecodeKey decodes a base64 gossip key and checks its length.
func DecodeKey(s string) ([]byte, error) {
	k, err := base64.StdEncoding.DecodeString(strings.TrimSpace(s))
	if err != nil {
		return nil, fmt.Errorf("membership: gossip key is not valid base64: %w", err)
	}
	if err := memberlist.ValidateKey(k); err != nil {
		return nil, fmt.Errorf("membership: gossip key: %w (generate one with `head -c 32 /dev/urandom | base64`)", err)
	}
	return k, nil
}

// loadKeyring builds the memberlist keyring from EncryptKey/KeyringFile; nil
// means gossip is not encrypted.
func loadKeyring(cfg *Config) (*memberlist.Keyring, error) {
	var keys [][]byte
	if cfg.KeyringFile != "" {
		data, err := os.ReadFile(cfg.KeyringFile)
		switch {
		case err == nil:
			var encoded []string
			if err := json.Unmarshal(data, &encoded); err != nil {
				return nil, fmt.Errorf("membership: config keyring_file %s: want a JSON array of base64 keys: %w", cfg.KeyringFile, err)
			}
			if len(encoded) == 0 {
				return nil, fmt.Errorf("membership: config keyring_file %s: holds no keys: add at least one base64 key", cfg.KeyringFile)
			}
			for i, e := range encoded {
				k, err := DecodeKey(e)
				if err != nil {
					return nil, fmt.Errorf("membership: config keyring_file %s: key %d: %w", cfg.KeyringFile, i, err)
				}
				keys = append(keys, k)
			}
			if cfg.EncryptKey != "" {
				k, _ := DecodeKey(cfg.EncryptKey)
				if !containsKey(keys, k) {
					return nil, fmt.Errorf("membership: config encrypt_key is not in keyring_file %s: install it with a key rotation or drop encrypt_key", cfg.KeyringFile)
				}
			}
		case errors.Is(err, os.ErrNotExist) && cfg.EncryptKey != "":
			k, _ := DecodeKey(cfg.EncryptKey)
			keys = [][]byte{k}
			if err := writeKeyringFile(cfg.KeyringFile, keys); err != nil {
				return nil, err
			}
		case errors.Is(err, os.ErrNotExist):
			return nil, fmt.Errorf("membership: config keyring_file %s does not exist and encrypt_key is empty: set encrypt_key to create it", cfg.KeyringFile)
		default:
			return nil, fmt.Errorf("membership: config keyring_file: %w", err)
		}
	} else if cfg.EncryptKey != "" {
		k, err := DecodeKey(cfg.EncryptKey)
		if err != nil {
			return nil, err
		}
		keys = [][]byte{k}
	}
	if len(keys) == 0 {
		return nil, nil
	}
	kr, err := memberlist.NewKeyring(keys, keys[0])
	if err != nil {
		return nil, fmt.Errorf("membership: keyring: %w", err)
	}
	return kr, nil
}

func containsKey(keys [][]byte, k []byte) bool {
	for _, x := range keys {
		if bytes.Equal(x, k) {
			return true
		}
	}
	return false
}

func writeKeyringFile(path string, keys [][]byte) error {
	enc := make([]string, len(keys))
	for i, k := range keys {
		enc[i] = base64.StdEncoding.EncodeToString(k)
	}
	data, _ := json.MarshalIndent(enc, "", "  ")
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("membership: keyring_file: %w", err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return fmt.Errorf("membership: keyring_file: %w", err)
	}
	return nil
}

// memberlistConfig returns the timing profile's memberlist configuration.
func memberlistConfig(profile string) *memberlist.Config {
	if profile == ProfileLocal {
		mc := memberlist.DefaultLocalConfig()
		mc.ProbeInterval = 200 * time.Millisecond
		mc.ProbeTimeout = 100 * time.Millisecond
		// A suspected node has 0.6–1.2 s to refute (more with independent
		// confirmations pending), which rides out scheduling stalls on a
		// loaded machine while still declaring a dead node failed in about a
		// second.
		mc.SuspicionMult = 3
		mc.SuspicionMaxTimeoutMult = 2
		mc.IndirectChecks = 2
		mc.GossipInterval = 50 * time.Millisecond
		mc.TCPTimeout = 500 * time.Millisecond
		mc.PushPullInterval = 5 * time.Second
		mc.GossipToTheDeadTime = 3 * time.Second
		// DefaultLocalConfig sends each broadcast only twice; with that, a
		// node often misses a join or leave until the next push/pull.
		mc.RetransmitMult = 4
		return mc
	}
	return memberlist.DefaultLANConfig()
}
