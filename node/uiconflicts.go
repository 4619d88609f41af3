package node

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/writ-dev/writ/api/writv1"
	"github.com/writ-dev/writ/metrics"
)

// The dashboard's conflicts panel lists the open cases and resolves one.
// Both go through the API's own handlers behind its authentication, as a
// gRPC call would: with API auth on, the page must send a token holding
// read (list) or operator (resolve), the resolution is audited under that
// identity, and the case records the browser's address beside the name
// given.

// uiConflicts is /ui/api/conflicts: the open conflict cases.
func (n *Node) uiConflicts(ctx context.Context, token string) ([]metrics.UIConflict, error) {
	resp, err := n.uiCall(ctx, token, "", "Conflicts", &writv1.ConflictsRequest{}, func(ctx context.Context, req any) (any, error) {
		return n.apis.Conflicts(ctx, req.(*writv1.ConflictsRequest))
	})
	if err != nil {
		return nil, err
	}
	var out []metrics.UIConflict
	for _, c := range resp.(*writv1.ConflictsResponse).GetConflicts() {
		var cs struct {
			Open bool `json:"open"`
		}
		if json.Unmarshal(c.Case, &cs) != nil || !cs.Open {
			continue
		}
		out = append(out, metrics.UIConflict{Key: c.Key, Rev: c.Rev, Case: json.RawMessage(c.Case)})
	}
	return out, nil
}

// uiResolve is /ui/api/conflicts/resolve: close one case through the log.
func (n *Node) uiResolve(ctx context.Context, r metrics.UIResolve) (metrics.UIResolved, error) {
	req := &writv1.ResolveConflictRequest{Key: r.Key, Reason: r.Reason, By: r.By}
	resp, err := n.uiCall(ctx, r.Token, r.Caller, "ResolveConflict", req, func(ctx context.Context, req any) (any, error) {
		return n.apis.ResolveConflict(ctx, req.(*writv1.ResolveConflictRequest))
	})
	if err != nil {
		return metrics.UIResolved{}, err
	}
	rr := resp.(*writv1.ResolveConflictResponse)
	return metrics.UIResolved{Outcome: rr.Outcome.String(), Index: rr.Index, Reason: rr.Reason, Case: json.RawMessage(rr.Case)}, nil
}

// uiCall runs the API handler h for method as a gRPC call with the
// page's token would run: through the API's authentication and audit,
// with the browser's address as the peer.
func (n *Node) uiCall(ctx context.Context, token, caller, method string, req any, h grpc.UnaryHandler) (any, error) {
	md := metadata.MD{}
	if token != "" {
		md.Set("authorization", "Bearer "+token)
	}
	ctx = metadata.NewIncomingContext(ctx, md)
	if a, err := net.ResolveTCPAddr("tcp", caller); err == nil {
		ctx = peer.NewContext(ctx, &peer.Peer{Addr: a})
	}
	resp, err := n.apiAuth.Unary(ctx, req, &grpc.UnaryServerInfo{FullMethod: "/writ.v1.Writ/" + method}, h)
	if err != nil {
		return nil, uiError(err)
	}
	return resp, nil
}

// uiError gives an API error the HTTP status the page shows it with.
func uiError(err error) error {
	st, _ := status.FromError(err)
	code := http.StatusServiceUnavailable
	switch st.Code() {
	case codes.Unauthenticated:
		code = http.StatusUnauthorized
	case codes.PermissionDenied:
		code = http.StatusForbidden
	case codes.InvalidArgument, codes.FailedPrecondition, codes.NotFound:
		code = http.StatusBadRequest
	case codes.DeadlineExceeded:
		code = http.StatusGatewayTimeout
	}
	return &metrics.UIError{Status: code, Msg: fmt.Sprintf("node: %s: %s", st.Code(), st.Message())}
}
