package config

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// APISecurity is the client API's TLS, authentication and limits.
type APISecurity struct {
	// CertFile and KeyFile serve TLS ("": plaintext).
	CertFile, KeyFile string
	// ClientCAFile verifies client certificates ("": none asked for).
	ClientCAFile string
	// TokensFile lists API identities: tokens and roles ("": none).
	TokensFile string
	// Reflection serves gRPC server reflection (always in dev mode).
	Reflection bool
	// ForwardStream: a follower forwards writes to the leader on one
	// Write stream rather than one unary call each.
	ForwardStream bool
	// Limits.
	MaxConnections     int
	MaxStreams         int
	MaxStreamCalls     int
	MaxWatchers        int
	MaxWatchersPerConn int
	WatchReplayRate    int
	KeepaliveMinTime   time.Duration
}

// TLS reports whether the API serves TLS.
func (a APISecurity) TLS() bool { return a.CertFile != "" }

// Auth reports whether every API call must carry an identity.
func (a APISecurity) Auth() bool { return a.ClientCAFile != "" || a.TokensFile != "" }

// apiSecurity reads the api.tls.*, api.tokens_file, api.reflection and
// api limit keys, and checks that the files are usable before the node
// starts.
func (s source) apiSecurity(n *Node) error {
	a := &n.API
	var err error
	for _, f := range []struct {
		key string
		dst *string
	}{{"api.tls.cert_file", &a.CertFile}, {"api.tls.key_file", &a.KeyFile}, {"api.tls.client_ca_file", &a.ClientCAFile}, {"api.tokens_file", &a.TokensFile}} {
		if *f.dst, err = s.str(f.key); err != nil {
			return err
		}
		if *f.dst != "" {
			if *f.dst, err = filepath.Abs(*f.dst); err != nil {
				return s.fail(f.key, err.Error(), "")
			}
		}
	}
	insecure, err := s.boolean("insecure")
	if err != nil {
		return err
	}
	switch {
	case a.CertFile != "" && a.KeyFile == "":
		return s.fail("api.tls.key_file", "not set but api.tls.cert_file is", "set api.tls.key_file to the certificate's private key")
	case a.KeyFile != "" && a.CertFile == "":
		return s.fail("api.tls.cert_file", "not set but api.tls.key_file is", "set api.tls.cert_file to the key's certificate")
	case a.ClientCAFile != "" && a.CertFile == "":
		return s.fail("api.tls.client_ca_file", "client certificates need a TLS API", "set api.tls.cert_file and api.tls.key_file too")
	case a.TokensFile != "" && a.CertFile == "" && !insecure:
		return s.fail("api.tokens_file", "tokens would cross the network in plaintext", "set api.tls.cert_file and api.tls.key_file, or set insecure: true")
	}
	if a.CertFile != "" {
		if err := privateFile(a.KeyFile); err != nil {
			return s.fail("api.tls.key_file", err.Error(), "chmod 600 it")
		}
		if _, err := tls.LoadX509KeyPair(a.CertFile, a.KeyFile); err != nil {
			return s.fail("api.tls.cert_file", "cannot load the key pair: "+oneLine(err.Error()), "point api.tls.cert_file and api.tls.key_file at a PEM certificate and its key")
		}
	}
	if a.ClientCAFile != "" {
		b, err := os.ReadFile(a.ClientCAFile)
		if err != nil {
			return s.fail("api.tls.client_ca_file", fmt.Sprintf("cannot read %s: %v", a.ClientCAFile, unwrapPath(err)), "point it at a PEM CA bundle")
		}
		if !x509.NewCertPool().AppendCertsFromPEM(b) {
			return s.fail("api.tls.client_ca_file", a.ClientCAFile+" holds no PEM certificate", "point it at a PEM CA bundle")
		}
	}
	if a.TokensFile != "" {
		if err := privateFile(a.TokensFile); err != nil {
			return s.fail("api.tokens_file", err.Error(), "chmod 600 it")
		}
	}
	if a.Reflection, err = s.boolean("api.reflection"); err != nil {
		return err
	}
	if a.ForwardStream, err = s.boolean("api.forward_stream"); err != nil {
		return err
	}
	for _, l := range []struct {
		key string
		dst *int
	}{{"api.max_connections", &a.MaxConnections}, {"api.max_streams", &a.MaxStreams}, {"api.max_stream_calls", &a.MaxStreamCalls}, {"api.max_watchers", &a.MaxWatchers}, {"api.max_watchers_per_conn", &a.MaxWatchersPerConn}, {"api.watch_replay_rate", &a.WatchReplayRate}} {
		if *l.dst, err = s.integerKey(l.key); err != nil {
			return err
		}
	}
	if a.KeepaliveMinTime, err = s.durKey("api.keepalive_min_time"); err != nil {
		return err
	}
	return nil
}

// privateFile checks that path is a regular file group and others cannot
// read or write.
func privateFile(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("cannot stat %s: %v", path, unwrapPath(err))
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file (mode %v)", path, fi.Mode())
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return fmt.Errorf("%s is readable or writable by group or others (mode %v)", path, fi.Mode().Perm())
	}
	return nil
}

// secureByDefault refuses a node that joins a cluster or listens beyond
// loopback without peer TLS, API TLS and a gossip key, unless insecure:
// true is set; then the node records what is missing and warns.
func (s source) secureByDefault(n *Node) error {
	if n.Dev {
		return nil
	}
	why := ""
	switch {
	case len(n.Join) > 0:
		why = "this node joins a cluster (join is set)"
	default:
		for _, k := range []string{"api.addr", "raft.addr", "gossip.addr"} {
			a, _ := s.str(k)
			if host, _, err := net.SplitHostPort(a); err == nil && !loopback(host) {
				why = fmt.Sprintf("this node listens beyond loopback (%s %s)", k, a)
				break
			}
		}
	}
	insecure, err := s.boolean("insecure")
	if err != nil {
		return err
	}
	if why == "" && !insecure {
		return s.pinPlugins(n, why, insecure)
	}
	var missing []string
	if !n.RaftTLS.Enabled() {
		missing = append(missing, "raft.tls.cert_file")
	}
	if n.API.CertFile == "" {
		missing = append(missing, "api.tls.cert_file")
	}
	if len(n.GossipKey) == 0 && !keyringExists(n.DataDir) {
		missing = append(missing, "gossip.key_file")
	}
	if len(missing) == 0 {
		return s.pinPlugins(n, why, insecure)
	}
	list := strings.Join(missing, ", ")
	if !insecure {
		return &Error{Key: list, Msg: "not set, and " + why,
			Fix: "set " + them(missing) + " (docs/security.md), or set insecure: true (flag --insecure, env WRIT_INSECURE) to run unprotected"}
	}
	n.Insecure, n.InsecureMissing = true, missing
	if why == "" {
		why = "insecure: true is set"
	}
	n.Warnings = append(n.Warnings, fmt.Sprintf("config: insecure: %s, running without %s: peers and clients are not all authenticated (docs/security.md)", why, list))
	return s.pinPlugins(n, why, insecure)
}

func them(l []string) string {
	if len(l) == 1 {
		return "it"
	}
	return "them"
}

func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// keyringExists reports whether the data directory holds a gossip keyring
// (kept across key rotations, used when no key is configured).
func keyringExists(dataDir string) bool {
	if dataDir == "" {
		return false
	}
	_, err := os.Stat(filepath.Join(dataDir, "serf.keyring"))
	return err == nil
}
