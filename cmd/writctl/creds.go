package main

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
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

// tlsConfig is the TLS configuration for writd's API (nil: plaintext);
// an error is one line naming the flag and the fix. The token travels with
// it through client.Config (only over TLS).
func (c *creds) tlsConfig() (*tls.Config, error) {
	if c.cacert == "" && c.cert == "" && c.key == "" {
		if c.token != "" {
			return nil, fail(exitUsage, "--token is sent only over TLS: pass --cacert FILE (env WRITCTL_CACERT) with the CA of writd's API certificate")
		}
		return nil, nil
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
	return tc, nil
}

func unwrapPathErr(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}

func flatErr(err error) string { return strings.Join(strings.Fields(err.Error()), " ") }
