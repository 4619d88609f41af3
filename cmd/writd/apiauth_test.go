package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	rpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	"github.com/writ-dev/writ/api/writv1"
)

// secureCluster is a 2-node cluster whose API serves TLS, asks for client
// certificates from ca and knows the tokens in tokens.
type secureCluster struct {
	*cluster
	ca, rogue *testCA
	dir       string
	tokens    map[string]string // identity -> bearer token
}

// Identities of the secured cluster. alice (certificate) may read and
// write, bob's certificate carries only the write role in its OU,
// "ci" (token) may read and write job.* entries, "reader" (token) may
// only read, "ops" (token) is an operator.
func newSecureCluster(t *testing.T, extra []string, hosts ...string) *secureCluster {
	t.Helper()
	dir := t.TempDir()
	s := &secureCluster{ca: newTestCA(t, dir, "writ-test"), rogue: newTestCA(t, dir, "rogue"), dir: dir,
		tokens: map[string]string{"ci": "tok-ci-0123456789", "reader": "tok-reader-0123456789", "ops": "tok-ops-0123456789"}}
	sum := func(tok string) string { h := sha256.Sum256([]byte(tok)); return hex.EncodeToString(h[:]) }
	tf := filepath.Join(dir, "tokens.yaml")
	doc := fmt.Sprintf(`identities:
  - {name: alice, roles: [read, write]}
  - {name: ci, token_sha256: %s, roles: [read, "write:job."]}
  - {name: reader, token_sha256: %s, roles: [read]}
  - {name: ops, token_sha256: %s, roles: [read, operator]}
`, sum(s.tokens["ci"]), sum(s.tokens["reader"]), sum(s.tokens["ops"]))
	if err := os.WriteFile(tf, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	harnessCert, harnessKey := s.ca.issue(t, certSpec{name: "harness", uri: "spiffe://writ/client/harness", ou: []string{"read"}})
	args := append([]string{"--api-tls-client-ca-file", s.ca.file, "--api-tokens-file", tf, "--membership-profile", "local", "--insecure"}, extra...)
	c := &cluster{args: args, dial: []grpc.DialOption{tlsDial(t, s.ca, harnessCert, harnessKey)},
		nodeArgs: func(p *proc) []string {
			cf, kf := s.ca.issue(t, certSpec{name: p.name, uri: "spiffe://writ/node/" + p.name, ips: []string{p.host}})
			return []string{"--api-tls-cert-file", cf, "--api-tls-key-file", kf}
		}}
	s.cluster = newClusterWith(t, c, hosts...)
	return s
}

// conn dials p with the given options (closed at the end of the test).
func (s *secureCluster) conn(p *proc, opts ...grpc.DialOption) writv1.WritClient {
	s.t.Helper()
	c, err := grpc.NewClient(p.api(), opts...)
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { _ = c.Close() })
	return writv1.NewWritClient(c)
}

// tokenConn is a TLS connection authenticating with identity's token.
func (s *secureCluster) tokenConn(p *proc, identity string) writv1.WritClient {
	return s.conn(p, tlsDial(s.t, s.ca, "", ""), grpc.WithPerRPCCredentials(testBearer(s.tokens[identity])))
}

// certConn is a TLS connection presenting a certificate issued by ca.
func (s *secureCluster) certConn(p *proc, ca *testCA, spec certSpec) writv1.WritClient {
	cf, kf := ca.issue(s.t, spec)
	return s.conn(p, tlsDial(s.t, s.ca, cf, kf))
}

type testBearer string

func (b testBearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}
func (testBearer) RequireTransportSecurity() bool { return true }

func wantCode(t *testing.T, what string, err error, code codes.Code, msgHas ...string) {
	t.Helper()
	if status.Code(err) != code {
		t.Fatalf("%s: got %v, want %s", what, err, code)
	}
	for _, m := range msgHas {
		if !strings.Contains(status.Convert(err).Message(), m) {
			t.Errorf("%s: message %q lacks %q", what, status.Convert(err).Message(), m)
		}
	}
}

func ctx5() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 5*time.Second)
}

// TestAPIAuthRealCluster: over two real writd processes with API TLS,
// client certificates and tokens: every RPC refuses a caller without
// credentials (the health service answers); roles are enforced with
// PermissionDenied naming the role; a certificate from another CA is
// refused at the handshake; a follower forwards the caller's identity to
// the leader, whose audit line names it; reflection is off; status warns
// of insecure: true; writctl authenticates with WRITCTL_* variables.
func TestAPIAuthRealCluster(t *testing.T) {
	s := newSecureCluster(t, []string{"--api-max-watchers", "3", "--api-max-watchers-per-conn", "2"}, "127.0.43.1", "127.0.43.2")
	leader := s.leader(20 * time.Second)
	follower := s.nodes[0]
	if follower == leader {
		follower = s.nodes[1]
	}

	t.Run("unauthenticated on every RPC", func(t *testing.T) {
		cc, err := grpc.NewClient(leader.api(), tlsDial(t, s.ca, "", ""))
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Close()
		sd := writv1.Writ_ServiceDesc
		n := 0
		for _, m := range sd.Methods {
			ctx, cancel := ctx5()
			err := cc.Invoke(ctx, "/"+sd.ServiceName+"/"+m.MethodName, &writv1.StatusRequest{}, &writv1.StatusResponse{})
			cancel()
			wantCode(t, m.MethodName, err, codes.Unauthenticated, "client certificate", "token")
			n++
		}
		for _, st := range sd.Streams {
			ctx, cancel := ctx5()
			cs, err := cc.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, "/"+sd.ServiceName+"/"+st.StreamName)
			if err == nil {
				// a refused stream may end before the request is sent:
				// its status comes from RecvMsg either way
				_ = cs.SendMsg(&writv1.WatchRequest{})
				_ = cs.CloseSend()
				err = cs.RecvMsg(&writv1.WatchEvent{})
			}
			cancel()
			wantCode(t, st.StreamName, err, codes.Unauthenticated)
			n++
		}
		if n != 19 {
			t.Errorf("checked %d RPCs, the service had 19: extend the role table in api/auth.go and this test", n)
		}
		ctx, cancel := ctx5()
		defer cancel()
		if _, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
			t.Errorf("health check without credentials: %v, want served", err)
		}
		plain := s.conn(leader, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if _, err := plain.Status(ctx, &writv1.StatusRequest{}); err == nil {
			t.Error("a plaintext client was served by a TLS API")
		}
		if _, err := s.tokenConn(leader, "nobody").Status(ctx, &writv1.StatusRequest{}); status.Code(err) != codes.Unauthenticated {
			t.Errorf("empty token: %v, want Unauthenticated", err)
		}
		bad := s.conn(leader, tlsDial(t, s.ca, "", ""), grpc.WithPerRPCCredentials(testBearer("tok-guess")))
		wantCode(t, "unknown token", func() error { _, err := bad.Status(ctx, &writv1.StatusRequest{}); return err }(), codes.Unauthenticated, "api.tokens_file")
	})

	t.Run("write identity cannot operate", func(t *testing.T) {
		bob := s.certConn(leader, s.ca, certSpec{name: "bob", uri: "spiffe://writ/client/bob", ou: []string{"write"}})
		ctx, cancel := ctx5()
		defer cancel()
		_, err := bob.Keyring(ctx, &writv1.KeyringRequest{Op: writv1.KeyringRequest_LIST})
		wantCode(t, "bob Keyring", err, codes.PermissionDenied, "operator", `"bob"`)
		st, err := bob.ConfigUpgrade(ctx, &writv1.ConfigUpgradeRequest{Document: []byte(`{}`), Format: "json"})
		if err == nil {
			_, err = st.Recv()
		}
		wantCode(t, "bob ConfigUpgrade", err, codes.PermissionDenied, "operator")
		_, err = s.tokenConn(leader, "ops").Keyring(ctx, &writv1.KeyringRequest{Op: writv1.KeyringRequest_LIST})
		if c := status.Code(err); c == codes.PermissionDenied || c == codes.Unauthenticated {
			t.Errorf("operator Keyring: %v, want it past authorization", err)
		}
	})

	t.Run("read identity cannot write", func(t *testing.T) {
		ctx, cancel := ctx5()
		defer cancel()
		r := s.tokenConn(leader, "reader")
		if _, err := r.Status(ctx, &writv1.StatusRequest{}); err != nil {
			t.Fatalf("reader Status: %v", err)
		}
		_, err := r.Submit(ctx, &writv1.SubmitRequest{Entry: &writv1.Entry{Type: "queue.control", Payload: []byte(`{"queue":"q","action":"create"}`)}})
		wantCode(t, "reader Submit", err, codes.PermissionDenied, "needs role write", `"reader"`)
	})

	t.Run("token auth and type prefix", func(t *testing.T) {
		ctx, cancel := ctx5()
		defer cancel()
		alice := s.certConn(leader, s.ca, certSpec{name: "alice", uri: "spiffe://writ/client/alice"})
		if _, err := alice.Submit(ctx, &writv1.SubmitRequest{Entry: &writv1.Entry{Type: "queue.control", Payload: []byte(`{"queue":"q","action":"create"}`)}}); err != nil {
			t.Fatalf("alice creates the queue: %v", err)
		}
		ci := s.tokenConn(leader, "ci")
		if _, err := ci.Submit(ctx, &writv1.SubmitRequest{Entry: &writv1.Entry{Type: "job.submit", Payload: []byte(`{"job_id":"tok-1","queue":"q","priority":1,"command":"x"}`)}}); err != nil {
			t.Fatalf("ci token submits job.submit: %v", err)
		}
		_, err := ci.Submit(ctx, &writv1.SubmitRequest{Entry: &writv1.Entry{Type: "queue.control", Payload: []byte(`{"queue":"q2","action":"create"}`)}})
		wantCode(t, "ci queue.control", err, codes.PermissionDenied, "queue.control")
	})

	t.Run("certificate from another CA", func(t *testing.T) {
		ctx, cancel := ctx5()
		defer cancel()
		m := s.certConn(leader, s.rogue, certSpec{name: "mallory", uri: "spiffe://writ/client/alice", ou: []string{"operator"}})
		_, err := m.Status(ctx, &writv1.StatusRequest{})
		// the handshake fails: the client sees the connection end (a TLS
		// alert or a broken pipe, by timing), never an answer
		wantCode(t, "rogue-CA certificate (refused at the TLS handshake)", err, codes.Unavailable)
	})

	t.Run("forwarding keeps identity", func(t *testing.T) {
		ctx, cancel := ctx5()
		defer cancel()
		alice := s.certConn(follower, s.ca, certSpec{name: "alice2", uri: "spiffe://writ/client/alice"})
		r, err := alice.Submit(ctx, &writv1.SubmitRequest{Entry: &writv1.Entry{Type: "job.submit", Id: "r-fwd-cert", Payload: []byte(`{"job_id":"fwd-1","queue":"q","priority":1,"command":"x"}`)}})
		if err != nil {
			t.Fatalf("submit through follower: %v", err)
		}
		if r.ServedBy != leader.name {
			t.Fatalf("served by %s, want the leader %s (forwarded)", r.ServedBy, leader.name)
		}
		ci := s.tokenConn(follower, "ci")
		if _, err := ci.Submit(ctx, &writv1.SubmitRequest{Entry: &writv1.Entry{Type: "job.submit", Id: "r-fwd-tok", Payload: []byte(`{"job_id":"fwd-2","queue":"q","priority":1,"command":"x"}`)}}); err != nil {
			t.Fatalf("token submit through follower: %v", err)
		}
		// Both went on the follower's one forwarding stream (opened with
		// alice's identity), each authenticated by its own credentials.
		// A reader is refused by the follower before any forward.
		waitLog(t, leader, 5*time.Second, "api: audit", "identity=alice", `via="certificate forwarded by `+follower.name+`"`, "method=Submit", "request_id=r-fwd-cert", "stream=true")
		waitLog(t, leader, 5*time.Second, "api: audit", "identity=ci", `via="token forwarded by `+follower.name+`"`, "request_id=r-fwd-tok", "stream=true")
		_, err = s.tokenConn(follower, "reader").Submit(ctx, &writv1.SubmitRequest{Entry: &writv1.Entry{Type: "job.submit", Id: "r-fwd-rd", Payload: []byte(`{"job_id":"fwd-3","queue":"q","priority":1,"command":"x"}`)}})
		wantCode(t, "reader's submit through the follower", err, codes.PermissionDenied, "role write")
		// a client certificate cannot claim to forward someone else
		bob := s.certConn(leader, s.ca, certSpec{name: "bob3", uri: "spiffe://writ/client/bob", ou: []string{"read"}})
		_, err = bob.Status(metadata.AppendToOutgoingContext(ctx, "writ-identity", "ops", "writ-roles", "operator"), &writv1.StatusRequest{})
		wantCode(t, "client asserting an identity", err, codes.PermissionDenied, "node certificate")
	})

	t.Run("watch limits", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		a := s.tokenConn(leader, "reader")
		b := s.tokenConn(leader, "reader")
		open := func(c writv1.WritClient) error {
			w, err := c.Watch(ctx, &writv1.WatchRequest{FromIndex: 1})
			if err != nil {
				return err
			}
			_, err = w.Recv()
			return err
		}
		for i := 0; i < 2; i++ {
			if err := open(a); err != nil {
				t.Fatalf("watch %d on one connection: %v", i+1, err)
			}
		}
		wantCode(t, "third watch on one connection", open(a), codes.ResourceExhausted, "api.max_watchers_per_conn")
		if err := open(b); err != nil {
			t.Fatalf("watch on a second connection: %v", err)
		}
		wantCode(t, "fourth watch on the node", open(b), codes.ResourceExhausted, "api.max_watchers")
	})

	t.Run("reflection off, insecure in status, writctl credentials", func(t *testing.T) {
		ctx, cancel := ctx5()
		defer cancel()
		cc, err := grpc.NewClient(leader.api(), s.dial...)
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Close()
		rs, err := rpb.NewServerReflectionClient(cc).ServerReflectionInfo(ctx)
		if err == nil {
			_ = rs.Send(&rpb.ServerReflectionRequest{MessageRequest: &rpb.ServerReflectionRequest_ListServices{}})
			_, err = rs.Recv()
		}
		wantCode(t, "reflection", err, codes.Unimplemented)
		st, err := leader.client.Status(ctx, &writv1.StatusRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(st.Insecure, ","); !strings.Contains(got, "raft.tls.cert_file") || !strings.Contains(got, "gossip.key_file") || strings.Contains(got, "api.tls") {
			t.Errorf("status insecure = %q: want the missing peer TLS and gossip key, not the API TLS that is set", got)
		}
		waitLog(t, leader, time.Second, "WARN", "insecure")
		writctl := func(env ...string) (string, error) {
			cmd := exec.Command(filepath.Join(s.bin, "writctl"), "--addr", leader.api(), "status")
			cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
			out, err := cmd.CombinedOutput()
			return string(out), err
		}
		out, err := writctl("WRITCTL_CACERT="+s.ca.file, "WRITCTL_TOKEN="+s.tokens["reader"])
		if err != nil || !strings.Contains(out, "WARNING") || !strings.Contains(out, "insecure") {
			t.Errorf("writctl status with WRITCTL_CACERT and WRITCTL_TOKEN: %v\n%s", err, out)
		}
		out, err = writctl("WRITCTL_CACERT=" + s.ca.file)
		if err == nil || strings.Count(strings.TrimSpace(out), "\n") != 0 || !strings.Contains(out, "Unauthenticated") {
			t.Errorf("writctl status without credentials: %v, want one Unauthenticated line\n%s", err, out)
		}
		out, err = writctl("WRITCTL_TOKEN=" + s.tokens["reader"])
		if err == nil || !strings.Contains(out, "--token is sent only over TLS") {
			t.Errorf("writctl --token without TLS: %v\n%s", err, out)
		}
	})
}

// TestInsecureRefusal: a node configured to join a cluster without peer
// TLS, API TLS and a gossip key refuses to start with one line naming
// them and insecure: true; so does a bootstrap node listening beyond
// loopback.
func TestInsecureRefusal(t *testing.T) {
	bin := buildBinaries(t)
	for name, args := range map[string][]string{
		"join": {"--data-dir", t.TempDir(), "--api-addr", "127.0.43.20:0", "--raft-addr", "127.0.43.20:7071", "--gossip-addr", "127.0.43.20:7072", "--join", "127.0.43.21:7072"},
		"wide": {"--data-dir", t.TempDir(), "--api-addr", "0.0.0.0:0", "--raft-addr", "127.0.43.22:7071", "--gossip-addr", "127.0.43.22:7072"},
	} {
		code, stdout, stderr := runWritd(t, bin, nil, args...)
		line := strings.TrimSpace(stderr)
		if code != exitConfig || stdout != "" || strings.Contains(line, "\n") {
			t.Fatalf("%s: exit %d stdout %q stderr %q: want exit 2 and one line", name, code, stdout, stderr)
		}
		for _, w := range []string{"raft.tls.cert_file", "api.tls.cert_file", "gossip.key_file", "insecure: true"} {
			if !strings.Contains(line, w) {
				t.Errorf("%s: %q lacks %q", name, line, w)
			}
		}
	}
}

// waitLog waits until one line of p's log holds every part.
func waitLog(t *testing.T, p *proc, d time.Duration, parts ...string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		b, _ := os.ReadFile(p.dir + ".log")
		for _, l := range strings.Split(string(b), "\n") {
			ok := true
			for _, w := range parts {
				if !strings.Contains(l, w) {
					ok = false
					break
				}
			}
			if ok {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s log has no line with %q within %s", p.name, parts, d)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
