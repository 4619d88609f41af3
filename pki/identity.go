package pki

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
)

// URI SAN layout of an identity.
const (
	trustDomain  = "writ"
	nodePrefix   = "/node/"
	clientPrefix = "/client/"
)

// idRE is the shape of a node ID or client name (node.id's rule).
var idRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,62}$`)

// roleRE is the shape of a role hint: "read", "write", "write:job.",
// "operator".
var roleRE = regexp.MustCompile(`^[a-z][a-z0-9_.:/-]{0,127}$`)

// NodeURI is the URI SAN naming node id.
func NodeURI(id string) *url.URL {
	return &url.URL{Scheme: "spiffe", Host: trustDomain, Path: nodePrefix + id}
}

// ClientURI is the URI SAN naming client name.
func ClientURI(name string) *url.URL {
	return &url.URL{Scheme: "spiffe", Host: trustDomain, Path: clientPrefix + name}
}

// NodeID is the node identity a certificate carries; an error says why it
// carries none (no node URI SAN, or more than one identity).
func NodeID(c *x509.Certificate) (string, error) {
	kind, id, err := identity(c)
	if err != nil {
		return "", err
	}
	if kind != nodePrefix {
		return "", fmt.Errorf("pki: certificate %q names client %q, not a node", c.Subject.CommonName, id)
	}
	return id, nil
}

// ClientIdentity is the client name and role hints a certificate carries.
// A node certificate is also accepted (roles empty, node true), so that a
// node can call another node's API with its own certificate.
func ClientIdentity(c *x509.Certificate) (name string, roles []string, node bool, err error) {
	kind, id, err := identity(c)
	if err != nil {
		return "", nil, false, err
	}
	if kind == nodePrefix {
		return id, nil, true, nil
	}
	for _, r := range c.Subject.OrganizationalUnit {
		if roleRE.MatchString(r) {
			roles = append(roles, r)
		}
	}
	return id, roles, false, nil
}

// identity finds the single writ identity URI SAN of c.
func identity(c *x509.Certificate) (kind, id string, err error) {
	if c == nil {
		return "", "", errors.New("pki: no certificate")
	}
	found := 0
	for _, u := range c.URIs {
		if u.Scheme != "spiffe" || u.Host != trustDomain {
			continue
		}
		for _, p := range []string{nodePrefix, clientPrefix} {
			if rest, ok := strings.CutPrefix(u.Path, p); ok && idRE.MatchString(rest) {
				kind, id = p, rest
				found++
			}
		}
	}
	switch found {
	case 0:
		return "", "", fmt.Errorf("pki: certificate %q carries no writ identity (a URI SAN spiffe://writ/node/<id> or spiffe://writ/client/<name>)", c.Subject.CommonName)
	case 1:
		return kind, id, nil
	}
	return "", "", fmt.Errorf("pki: certificate %q carries %d writ identities; want exactly one", c.Subject.CommonName, found)
}

func checkName(what, s string) error {
	if !idRE.MatchString(s) {
		return fmt.Errorf("pki: %s %q: want [a-z0-9][a-z0-9_.-]{0,62}", what, s)
	}
	return nil
}
