package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// creds are the TLS and token flags; each has a WRITCTL_* variable that
// applies when the flag is not given.
type creds struct {
	cacert, cert, key, token string
}

var credFlags = []struct{ flag, env, help string }{
	{"cacert", "WRITCTL_CACERT", "PEM CA bundle to verify writd's API certificate with; turns on TLS"},
	{"cert", "WRITCTL_CERT", "PEM client certificate to authenticate with (with --key); turns on TLS"},
	{"key", "WRITCTL_KEY", "PEM private key of --cert"},
	{"token", "WRITCTL_TOKEN", "bearer token to authenticate with (sent only over TLS); prefer the environment variable, flags show in ps"},
}

func (c *creds) addFlags(pf *pflag.FlagSet) {
	dst := []*string{&c.cacert, &c.cert, &c.key, &c.token}
	for i, f := range credFlags {
		pf.StringVar(dst[i], f.flag, "", f.help+" (env "+f.env+")")
	}
}

// fromEnv fills the flags not given on the command line from the
// environment.
func (c *creds) fromEnv(cmd *cobra.Command, env func(string) string) {
	dst := []*string{&c.cacert, &c.cert, &c.key, &c.token}
	for i, f := range credFlags {
		if !cmd.Flags().Changed(f.flag) {
			if v := env(f.env); v != "" {
				*dst[i] = v
			}
		}
	}
}

// dialOptions are the transport credentials (and the token) for
// grpc.NewClient; an error is one line naming the flag and the fix.
func (c *creds) dialOptions() ([]grpc.DialOption, error) {
	if c.cacert == "" && c.cert == "" && c.key == "" {
		if c.token != "" {
			return nil, fail(exitUsage, "--token is sent only over TLS: pass --cacert FILE (env WRITCTL_CACERT) with the CA of writd's API certificate")
		}
		return []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, nil
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if c.cacert != "" {
		b, err := os.ReadFile(c.cacert)
		if err != nil {
			return nil, fail(exitUsage, "--cacert %s: %v: pass a readable PEM CA bundle (env WRITCTL_CACERT)", c.cacert, unwrapPathErr(err))
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(b) {
			return nil, fail(exitUsage, "--cacert %s holds no PEM certificate: pass the CA bundle writd's API certificate is signed by", c.cacert)
		}
		tc.RootCAs = pool
	}
	switch {
	case c.cert != "" && c.key == "":
		return nil, fail(exitUsage, "--cert needs --key (env WRITCTL_KEY): pass the certificate's private key")
	case c.key != "" && c.cert == "":
		return nil, fail(exitUsage, "--key needs --cert (env WRITCTL_CERT): pass the key's certificate")
	case c.cert != "":
		pair, err := tls.LoadX509KeyPair(c.cert, c.key)
		if err != nil {
			return nil, fail(exitUsage, "--cert %s / --key %s: %s: pass a PEM certificate and its private key", c.cert, c.key, flatErr(err))
		}
		tc.Certificates = []tls.Certificate{pair}
	}
	opts := []grpc.DialOption{grpc.WithTransportCredentials(credentials.NewTLS(tc))}
	if c.token != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(bearer(c.token)))
	}
	return opts, nil
}

// bearer sends a token as "authorization: Bearer TOKEN", over TLS only.
type bearer string

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}

func (bearer) RequireTransportSecurity() bool { return true }

func unwrapPathErr(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}

func flatErr(err error) string { return strings.Join(strings.Fields(err.Error()), " ") }
