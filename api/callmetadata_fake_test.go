package api

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	"github.com/writ-dev/writ/api/writv1"
)

// TestWriteStream_FakeBackendCallMetadataReplacesTheStreams: a call that
// carries its own metadata is authenticated and authorized by it alone,
// as a unary call sending it would be: on a stream opened with a writer's
// token, a call carrying a reader's token is refused, one carrying no
// credentials at all is refused (the stream's token is not lent to it),
// and a call carrying a writer's token on a reader's stream is allowed.
// Malformed metadata is refused with the entry and key named.
func TestWriteStream_FakeBackendCallMetadataReplacesTheStreams(t *testing.T) {
	f := &fakeNode{id: "n1", leader: true}
	tok := func(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }
	acc, err := ParseAccess(fmt.Appendf(nil, `identities:
  - {name: writer, token_sha256: %s, roles: [write]}
  - {name: reader, token_sha256: %s, roles: [read]}
`, tok("tw"), tok("tr")))
	if err != nil {
		t.Fatal(err)
	}
	a := &Auth{Enabled: true, Access: acc}
	_, c, ctx := serveStreamFake(t, "127.0.3.21:0", Config{Intercept: a.Unary}, f, ServerOptions(Limits{}, a)...)
	with := func(seq uint64, id string, md ...string) *writv1.WriteRequest {
		r := submitCall(seq, id)
		for i := 0; i+1 < len(md); i += 2 {
			r.Metadata = append(r.Metadata, &writv1.MetadataEntry{Key: md[i], Value: md[i+1]})
		}
		return r
	}
	cases := []struct {
		stream string // the stream's token
		call   *writv1.WriteRequest
		want   codes.Code
		msg    string // in the refusal
	}{
		{"tw", with(1, "w-own"), codes.OK, ""},
		{"tw", with(2, "w-reader", "authorization", "Bearer tr"), codes.PermissionDenied, "reader"},
		{"tw", with(3, "w-none", "x-trace", "1"), codes.Unauthenticated, "no credentials"},
		{"tr", with(4, "r-writer", "authorization", "Bearer tw"), codes.OK, ""},
		{"tr", with(5, "r-own"), codes.PermissionDenied, "reader"},
		{"tw", with(6, "w-bad", "authorization", "Bearer tw", "grpc-timeout", "1S"), codes.InvalidArgument, `metadata[1].key "grpc-timeout"`},
		{"tw", with(7, "w-bin", "x-bin", "AA"), codes.InvalidArgument, "binary"},
		{"tw", with(8, "w-char", "Bad Key", "v"), codes.InvalidArgument, "character"},
		{"tw", with(9, "w-many", strings.Split(strings.Repeat("a,b,", 17), ",")...), codes.InvalidArgument, "at most 16"},
		{"tw", with(10, "w-big", "authorization", "Bearer tw", "x-big", strings.Repeat("v", 9<<10)), codes.InvalidArgument, "bytes"},
	}
	for _, tc := range cases {
		ws, err := c.Write(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+tc.stream))
		if err != nil {
			t.Fatal(err)
		}
		if err := ws.Send(tc.call); err != nil {
			t.Fatal(err)
		}
		r, err := ws.Recv()
		if err != nil {
			t.Fatalf("%s: %v", tc.call.GetSubmit().GetEntry().GetId(), err)
		}
		got := codes.Code(r.GetError().GetCode())
		if got != tc.want || !strings.Contains(r.GetError().GetMessage(), tc.msg) {
			t.Errorf("%s on a %q stream: %s %q, want %s naming %q", tc.call.GetSubmit().GetEntry().GetId(), tc.stream, got, r.GetError().GetMessage(), tc.want, tc.msg)
		}
		_ = ws.CloseSend()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.submitted) != 2 {
		t.Fatalf("%d submits reached the write path, want the 2 allowed", len(f.submitted))
	}
}
