package node

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net"
	"os"

	"golang.org/x/net/netutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/node/config"
)

// apiServer is the client API's transport: its gRPC server options (TLS,
// authentication, limits), the credentials a follower forwards calls to
// the leader with, and the listener capped at api.max_connections.
type apiServer struct {
	opts    []grpc.ServerOption
	forward credentials.TransportCredentials
	lis     net.Listener
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
	s := &apiServer{lis: netutil.LimitListener(lis, a.MaxConnections), auth: auth}
	s.opts = api.ServerOptions(api.Limits{MaxStreams: a.MaxStreams, MaxWatchers: a.MaxWatchers, MaxWatchersPerConn: a.MaxWatchersPerConn, KeepaliveMinTime: a.KeepaliveMinTime}, auth)
	if !a.TLS() {
		return s, nil
	}
	cert, err := tls.LoadX509KeyPair(a.CertFile, a.KeyFile)
	if err != nil {
		return nil, startErr("api.tls.cert_file %s: %v: point it and api.tls.key_file at a PEM certificate and its key", a.CertFile, err)
	}
	srv := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	fwd := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if a.ClientCAFile != "" {
		pool, err := certPool(a.ClientCAFile)
		if err != nil {
			return nil, startErr("api.tls.client_ca_file: %v", err)
		}
		// a client may also authenticate with a token instead
		srv.ClientAuth, srv.ClientCAs = tls.VerifyClientCertIfGiven, pool
		// the leader's API certificate is checked against the same CA
		fwd.RootCAs = pool
	}
	s.opts = append(s.opts, grpc.Creds(credentials.NewTLS(srv)))
	s.forward = credentials.NewTLS(fwd)
	return s, nil
}

func certPool(file string) (*x509.CertPool, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("node: %s holds no PEM certificate", file)
	}
	return p, nil
}
