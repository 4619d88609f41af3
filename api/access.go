package api

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Roles an API identity can hold (docs/security.md).
const (
	RoleRead     = "read"
	RoleWrite    = "write"
	RoleOperator = "operator"
)

// maxAccessFile bounds the size of an API tokens file.
const maxAccessFile = 1 << 20

// Access is who may call the API: identities by name, with their roles,
// and the hashes of their bearer tokens.
type Access struct {
	roles  map[string][]string
	tokens []tokenEntry
}

type tokenEntry struct {
	hash [sha256.Size]byte
	name string
}

// accessFile is the YAML form of api.tokens_file.
type accessFile struct {
	Identities []struct {
		Name        string   `yaml:"name"`
		TokenSHA256 string   `yaml:"token_sha256"`
		Roles       []string `yaml:"roles"`
	} `yaml:"identities"`
}

var identityNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.@:-]{0,127}$`)

// CheckRole validates one role: read, write, write:TYPE_PREFIX or operator.
func CheckRole(r string) error {
	switch {
	case r == RoleRead, r == RoleWrite, r == RoleOperator:
		return nil
	case strings.HasPrefix(r, RoleWrite+":") && len(r) > len(RoleWrite)+1:
		return nil
	}
	return fmt.Errorf("%q is not a role: use read, write, write:TYPE_PREFIX (such as write:job.) or operator", r)
}

// LoadAccess reads a tokens file: a YAML list of identities, each a name,
// an optional token_sha256 (the hex SHA-256 of its bearer token) and
// roles. A client certificate naming an identity gets its roles too. The
// file must be private to its owner (mode 0600).
func LoadAccess(path string) (*Access, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("api: tokens file: %w", err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("api: tokens file %s is readable or writable by group or others (mode %v): chmod 600 it", path, fi.Mode().Perm())
	}
	if fi.Size() > maxAccessFile {
		return nil, fmt.Errorf("api: tokens file %s is %d bytes, the limit is %d", path, fi.Size(), maxAccessFile)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("api: tokens file: %w", err)
	}
	a, err := ParseAccess(b)
	if err != nil {
		return nil, fmt.Errorf("api: tokens file %s: %w", path, err)
	}
	return a, nil
}

// ParseAccess parses the content of a tokens file (see LoadAccess).
func ParseAccess(b []byte) (*Access, error) {
	var f accessFile
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("cannot parse YAML: %s: write identities: [{name: NAME, token_sha256: HEX, roles: [read]}]", oneLine(err.Error()))
	}
	a := &Access{roles: map[string][]string{}}
	seenHash := map[[sha256.Size]byte]string{}
	for i, id := range f.Identities {
		where := fmt.Sprintf("identities[%d]", i)
		if !identityNameRE.MatchString(id.Name) {
			return nil, fmt.Errorf("%s.name: %q is not a name: use letters, digits, '_', '.', '@', ':' or '-'", where, id.Name)
		}
		if _, dup := a.roles[id.Name]; dup {
			return nil, fmt.Errorf("%s.name: %q is listed twice: merge its roles into one entry", where, id.Name)
		}
		if len(id.Roles) == 0 {
			return nil, fmt.Errorf("%s.roles: %s has no roles: list at least one of read, write, write:TYPE_PREFIX, operator", where, id.Name)
		}
		for _, r := range id.Roles {
			if err := CheckRole(r); err != nil {
				return nil, fmt.Errorf("%s.roles: %w", where, err)
			}
		}
		a.roles[id.Name] = append([]string(nil), id.Roles...)
		if id.TokenSHA256 == "" {
			continue
		}
		h, err := hex.DecodeString(id.TokenSHA256)
		if err != nil || len(h) != sha256.Size {
			return nil, fmt.Errorf("%s.token_sha256: not a hex SHA-256: write the output of `printf %%s \"$TOKEN\" | sha256sum`", where)
		}
		var e tokenEntry
		copy(e.hash[:], h)
		e.name = id.Name
		if other, dup := seenHash[e.hash]; dup {
			return nil, fmt.Errorf("%s.token_sha256: the same token as %s: give each identity its own token", where, other)
		}
		seenHash[e.hash] = id.Name
		a.tokens = append(a.tokens, e)
	}
	return a, nil
}

// Roles are the roles the tokens file grants name.
func (a *Access) Roles(name string) []string {
	if a == nil {
		return nil
	}
	return a.roles[name]
}

// tokenIdentity finds the identity whose token hashes to the token's
// SHA-256, comparing every entry in constant time.
func (a *Access) tokenIdentity(token string) (string, bool) {
	if a == nil {
		return "", false
	}
	h := sha256.Sum256([]byte(token))
	found := ""
	for _, e := range a.tokens {
		if subtle.ConstantTimeCompare(h[:], e.hash[:]) == 1 && found == "" {
			found = e.name
		}
	}
	return found, found != ""
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
