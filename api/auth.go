package api

import (
	"context"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/writ-dev/writ/api/writv1"
)

// Metadata a follower sets when it forwards a certificate-authenticated
// call to the leader; the leader believes them only from a node
// certificate.
const (
	identityKey = "writ-identity"
	rolesKey    = "writ-roles"
)

// methodRoles is the role each writ.v1 method needs. A method missing
// here needs operator (deny by default).
var methodRoles = map[string]string{
	"Get": RoleRead, "List": RoleRead, "Watch": RoleRead, "Status": RoleRead, "Outcome": RoleRead,
	"Conflicts": RoleRead, "Outbox": RoleRead, "Members": RoleRead, "Plugins": RoleRead, "ConfigShow": RoleRead, "Schema": RoleRead,
	"Submit": RoleWrite, "Report": RoleWrite, "Deliver": RoleWrite, "Write": RoleWrite,
	"ConfigUpgrade": RoleOperator, "Keyring": RoleOperator, "ResolveConflict": RoleOperator,
	"PromoteMember": RoleOperator,
}

// RequiredRole is the role a full gRPC method name needs; "" means the
// method is open to everyone (the gRPC health service).
func RequiredRole(fullMethod string) string {
	switch {
	case strings.HasPrefix(fullMethod, "/grpc.health.v1.Health/"):
		return ""
	case strings.HasPrefix(fullMethod, "/grpc.reflection."):
		return RoleRead
	}
	if m, ok := strings.CutPrefix(fullMethod, "/writ.v1.Writ/"); ok {
		if r, ok := methodRoles[m]; ok {
			return r
		}
	}
	return RoleOperator
}

// Identity is an authenticated API caller.
type Identity struct {
	Name  string
	Roles []string
	// Via says how the caller proved it: "certificate", "token", and
	// for a call a follower forwarded, "... forwarded by NODE".
	Via string
	// Node is set for a node certificate (spiffe://writ/node/ID).
	Node bool
	// token is the bearer token, kept to forward the call unchanged.
	token string
}

type identityCtxKey struct{}

// IdentityFrom returns the caller's identity, if the API checked one.
func IdentityFrom(ctx context.Context) (Identity, bool) {
	id, ok := ctx.Value(identityCtxKey{}).(Identity)
	return id, ok
}

// Auth authenticates and authorizes every call when enabled, and writes
// an audit line for every write and operator call.
type Auth struct {
	// Enabled: every call but the health service needs an identity.
	Enabled bool
	// Access maps identities to roles and tokens (nil: certificates only,
	// with roles from their OU).
	Access *Access
	Logger *slog.Logger
}

func (a *Auth) log() *slog.Logger {
	if a.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return a.Logger
}

// Unary is the unary server interceptor.
func (a *Auth) Unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	role := RequiredRole(info.FullMethod)
	if !a.Enabled || role == "" {
		return handler(ctx, req)
	}
	id, err := a.check(ctx, info.FullMethod, role, entryType(req))
	if err != nil {
		return nil, err
	}
	resp, err := handler(context.WithValue(ctx, identityCtxKey{}, id), req)
	if role != RoleRead {
		a.audit(ctx, id, info.FullMethod, requestID(req, resp, err), err)
	}
	return resp, err
}

// Stream is the stream server interceptor.
func (a *Auth) Stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	role := RequiredRole(info.FullMethod)
	if !a.Enabled || role == "" {
		return handler(srv, ss)
	}
	if info.FullMethod == writv1.Writ_Write_FullMethodName {
		// A Write stream needs an identity; each call on it is
		// authorized and audited as its unary call (Config.Intercept),
		// so that write:PREFIX roles are judged by the entry's type.
		id, err := a.authenticate(ss.Context())
		if err != nil {
			return err
		}
		return handler(srv, &identityStream{ServerStream: ss, ctx: context.WithValue(ss.Context(), identityCtxKey{}, id)})
	}
	id, err := a.check(ss.Context(), info.FullMethod, role, "")
	if err != nil {
		return err
	}
	err = handler(srv, &identityStream{ServerStream: ss, ctx: context.WithValue(ss.Context(), identityCtxKey{}, id)})
	if role != RoleRead {
		a.audit(ss.Context(), id, info.FullMethod, "", err)
	}
	return err
}

type identityStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *identityStream) Context() context.Context { return s.ctx }

// check authenticates the caller and checks it holds role (for a write,
// one covering entry type typ).
func (a *Auth) check(ctx context.Context, method, role, typ string) (Identity, error) {
	id, err := a.authenticate(ctx)
	if err != nil {
		return Identity{}, err
	}
	if !hasRole(id.Roles, role, typ) {
		what := shortMethod(method)
		if typ != "" {
			what += " of " + typ
		}
		need := role
		if role == RoleWrite && typ != "" {
			need = "write (or write:PREFIX covering " + typ + ")"
		}
		a.log().Warn("api: permission denied", "identity", id.Name, "via", id.Via, "method", what, "needs", role, "has", strings.Join(id.Roles, ","))
		return Identity{}, status.Errorf(codes.PermissionDenied, "api: %s needs role %s; identity %q has %s: grant it in api.tokens_file", what, need, id.Name, rolesText(id.Roles))
	}
	return id, nil
}

func rolesText(r []string) string {
	if len(r) == 0 {
		return "no roles"
	}
	return "roles " + strings.Join(r, ", ")
}

// hasRole reports whether roles allow role; a write of entry type typ is
// also allowed by write:PREFIX when typ starts with PREFIX.
func hasRole(roles []string, role, typ string) bool {
	for _, r := range roles {
		if r == role {
			return true
		}
		if role == RoleWrite && typ != "" {
			if p, ok := strings.CutPrefix(r, RoleWrite+":"); ok && strings.HasPrefix(typ, p) {
				return true
			}
		}
	}
	return false
}

// authenticate finds the caller's identity: a bearer token, else a
// verified client certificate; a node certificate may carry a forwarded
// caller's identity.
func (a *Auth) authenticate(ctx context.Context) (Identity, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	cert := verifiedCert(ctx)
	forwardedBy := ""
	var certID Identity
	if cert != nil {
		var err error
		if certID, err = a.certIdentity(cert); err != nil {
			return Identity{}, status.Errorf(codes.Unauthenticated, "api: client certificate: %v", err)
		}
		if certID.Node && len(md.Get(forwardedKey)) > 0 {
			forwardedBy = certID.Name
		}
	}
	if auth := md.Get("authorization"); len(auth) > 0 {
		tok, ok := strings.CutPrefix(auth[0], "Bearer ")
		if !ok || tok == "" {
			return Identity{}, status.Error(codes.Unauthenticated, "api: the authorization header is not \"Bearer TOKEN\": pass the token with writctl --token (env WRITCTL_TOKEN)")
		}
		name, ok := a.Access.tokenIdentity(tok)
		if !ok {
			a.log().Warn("api: unknown bearer token", "peer", peerAddr(ctx))
			return Identity{}, status.Error(codes.Unauthenticated, "api: the bearer token is not in this node's api.tokens_file: check --token (env WRITCTL_TOKEN)")
		}
		id := Identity{Name: name, Roles: a.Access.Roles(name), Via: "token", token: tok}
		if forwardedBy != "" {
			id.Via += " forwarded by " + forwardedBy
		}
		return id, nil
	}
	if names := md.Get(identityKey); len(names) > 0 {
		if cert == nil || !certID.Node {
			return Identity{}, status.Error(codes.PermissionDenied, "api: only a node certificate may forward a caller's identity ("+identityKey+")")
		}
		id := Identity{Name: names[0], Via: "certificate forwarded by " + certID.Name}
		for _, r := range md.Get(rolesKey) {
			for _, p := range strings.Split(r, ",") {
				if p != "" && CheckRole(p) == nil {
					id.Roles = append(id.Roles, p)
				}
			}
		}
		return id, nil
	}
	if cert != nil {
		return certID, nil
	}
	return Identity{}, status.Error(codes.Unauthenticated, "api: no credentials: this node needs a client certificate (writctl --cert/--key) or a bearer token (writctl --token)")
}

// verifiedCert is the caller's client certificate, if TLS verified one.
func verifiedCert(ctx context.Context) *x509.Certificate {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return nil
	}
	ti, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(ti.State.VerifiedChains) == 0 || len(ti.State.VerifiedChains[0]) == 0 {
		return nil
	}
	return ti.State.VerifiedChains[0][0]
}

var certRoleRE = regexp.MustCompile(`^(read|write|operator|write:[A-Za-z0-9_.:/-]+)$`)

// certIdentity names a client certificate: its spiffe://writ/client/NAME
// or spiffe://writ/node/ID URI SAN, else its common name. Its roles are
// the tokens file's for that name plus role names in its OU.
func (a *Auth) certIdentity(c *x509.Certificate) (Identity, error) {
	id := Identity{Via: "certificate"}
	for _, u := range c.URIs {
		kind, name, ok := writURI(u)
		if !ok {
			continue
		}
		if id.Name != "" {
			return Identity{}, fmt.Errorf("%q carries more than one writ identity", c.Subject.CommonName)
		}
		id.Name, id.Node = name, kind == "node"
	}
	if id.Name == "" {
		id.Name = c.Subject.CommonName
	}
	if id.Name == "" {
		return Identity{}, fmt.Errorf("it names no identity: issue it with a spiffe://writ/client/NAME URI SAN or a common name")
	}
	if id.Node {
		return id, nil
	}
	id.Roles = append(id.Roles, a.Access.Roles(id.Name)...)
	for _, r := range c.Subject.OrganizationalUnit {
		if certRoleRE.MatchString(r) && !slices.Contains(id.Roles, r) {
			id.Roles = append(id.Roles, r)
		}
	}
	return id, nil
}

// writURI splits spiffe://writ/node/ID and spiffe://writ/client/NAME.
func writURI(u *url.URL) (kind, name string, ok bool) {
	if u.Scheme != "spiffe" || u.Host != "writ" {
		return "", "", false
	}
	for _, k := range []string{"node", "client"} {
		if n, found := strings.CutPrefix(u.Path, "/"+k+"/"); found && identityNameRE.MatchString(n) {
			return k, n, true
		}
	}
	return "", "", false
}

// forwardMetadata is what a follower adds when it forwards the call in
// ctx to the leader: the caller's token unchanged, or, for a certificate
// caller, its name and roles (which the leader believes only from this
// node's certificate).
func forwardMetadata(ctx context.Context) []string {
	id, ok := IdentityFrom(ctx)
	if !ok {
		return nil
	}
	if id.token != "" {
		return []string{"authorization", "Bearer " + id.token}
	}
	return []string{identityKey, id.Name, rolesKey, strings.Join(id.Roles, ",")}
}

// audit writes one line per write or operator call; a call made on a
// Write stream says so (stream=true).
func (a *Auth) audit(ctx context.Context, id Identity, method, reqID string, err error) {
	args := []any{"identity", id.Name, "via", id.Via, "method", shortMethod(method), "request_id", reqID,
		"code", status.Code(err).String(), "peer", peerAddr(ctx)}
	if onStream, _ := ctx.Value(streamCallKey{}).(bool); onStream {
		args = append(args, "stream", true)
	}
	a.log().Info("api: audit", args...)
}

func shortMethod(full string) string {
	if i := strings.LastIndexByte(full, '/'); i >= 0 {
		return full[i+1:]
	}
	return full
}

func peerAddr(ctx context.Context) string {
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		return p.Addr.String()
	}
	return ""
}

// entryOf is the entry of a Submit, Report or Deliver request.
func entryOf(req any) *writv1.Entry {
	switch r := req.(type) {
	case *writv1.SubmitRequest:
		return r.GetEntry()
	case *writv1.ReportRequest:
		return r.GetEntry()
	case *writv1.DeliverRequest:
		return r.GetEntry()
	}
	return nil
}

// entryType is the entry type of a write request ("" for other calls).
func entryType(req any) string { return entryOf(req).GetType() }

// requestID names the request a write was about, for the audit line.
func requestID(req, resp any, err error) string {
	if od, ok := OutcomeFromError(err); ok && od.GetRequestId() != "" {
		return od.GetRequestId()
	}
	switch r := resp.(type) {
	case interface{ GetRequestId() string }:
		if id := r.GetRequestId(); id != "" {
			return id
		}
	case interface{ GetFactId() string }:
		if id := r.GetFactId(); id != "" {
			return id
		}
	}
	return entryOf(req).GetId()
}
