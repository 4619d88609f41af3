package node

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/node/config"
	"github.com/writ-dev/writ/pki"
)

// apiServer is the client API's transport: its gRPC server options (TLS,
// authentication, limits), the credentials a follower forwards calls to
// the leader with, and the listener capped at api.max_connections.
type apiServer struct {
	opts    []grpc.ServerOption
	forward credentials.TransportCredentials
	lis     net.Listener
	// tls is the API's certificate, key and client CA (nil: plaintext).
	tls *pki.Reloader
	// auth is the API's authentication, also applied to the dashboard's
	// operator actions (node/uiconflicts.go).
	auth *api.Auth
}

func newAPIServer(cfg *config.Node, lis net.Listener, logger *slog.Logger) (*apiServer, error) {
	a := cfg.API
	auth := &api.Auth{Enabled: a.Auth(), Logger: logger}
	if a.TokensFile != "" {
		acc, err := api.LoadAccess(a.TokensFile)
		if err != nil {
			return nil, startErr("api.tokens_file: %v", err)
		}
		auth.Access = acc
	}
	s := &apiServer{lis: newLimitListener(lis, a.MaxConnections, logger), auth: auth}
	s.opts = api.ServerOptions(api.Limits{MaxStreams: a.MaxStreams, MaxWatchers: a.MaxWatchers, MaxWatchersPerConn: a.MaxWatchersPerConn, KeepaliveMinTime: a.KeepaliveMinTime, Logger: logger}, auth)
	if !a.TLS() {
		return s, nil
	}
	r, err := pki.NewReloader(a.CertFile, a.KeyFile, a.ClientCAFile)
	if err != nil {
		return nil, startErr("api.tls.cert_file %s: %v: point it and api.tls.key_file (and api.tls.client_ca_file) at a PEM certificate, its key (and a CA)", a.CertFile, err)
	}
	s.tls = r
	s.opts = append(s.opts, grpc.Creds(credentials.NewTLS(&tls.Config{
		MinVersion: tls.VersionTLS12,
		// Each handshake gets the material in use: a reload (SIGHUP or a
		// changed file) serves new connections, established ones keep
		// theirs.
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) { return apiServerConfig(r), nil },
	})))
	s.forward = forwardCreds{r: r}
	return s, nil
}

// apiServerConfig is the API's TLS server configuration with the material
// in use: its certificate, and with a client CA, client certificates
// verified against it when given (a client may use a token instead).
func apiServerConfig(r *pki.Reloader) *tls.Config {
	cert, pool := r.Current()
	c := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{*cert}, NextProtos: []string{"h2"}}
	if pool != nil {
		c.ClientAuth, c.ClientCAs = tls.VerifyClientCertIfGiven, pool
	}
	return c
}

// forwardCreds is how a follower connects to the leader's API: it presents
// its own API certificate in use and verifies the leader's against the
// client CA in use (against the system's roots without one), read at
// every handshake so that a reload applies to the next connection.
type forwardCreds struct{ r *pki.Reloader }

func (f forwardCreds) tls() credentials.TransportCredentials {
	cert, pool := f.r.Current()
	return credentials.NewTLS(&tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{*cert}, RootCAs: pool})
}

func (f forwardCreds) ClientHandshake(ctx context.Context, authority string, conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return f.tls().ClientHandshake(ctx, authority, conn)
}

func (f forwardCreds) ServerHandshake(net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return nil, nil, errors.New("node: forwarding credentials are client-side only")
}

func (f forwardCreds) Info() credentials.ProtocolInfo { return f.tls().Info() }

func (f forwardCreds) Clone() credentials.TransportCredentials { return f }

func (f forwardCreds) OverrideServerName(string) error { return nil }
