package sdk

import (
	"context"
	"fmt"
	"os"
	"runtime/debug"

	plugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/writ-dev/writ/kv"
	pb "github.com/writ-dev/writ/plugins/proto"
)

// Handshake is the go-plugin handshake every writ handler plugin uses.
var Handshake = plugin.HandshakeConfig{
	ProtocolVersion:  pluginVersion,
	MagicCookieKey:   pb.MagicCookieKey,
	MagicCookieValue: pb.MagicCookieValue,
}

const pluginVersion = pb.ProtocolVersion

// maxMessage bounds one Evaluate request or response.
const maxMessage = 1 << 30

// PluginSet is the go-plugin plugin set that serves p. Serve uses it; it is
// exported for programs that assemble their own plugin.ServeConfig.
func PluginSet(p *Plugin) plugin.PluginSet {
	return plugin.PluginSet{pb.PluginName: &grpcPlugin{p: p}}
}

// Serve runs p as a go-plugin gRPC plugin process until the host stops it.
// It exits with status 1 and a message on stderr when p is misdeclared.
// Nothing may be written to stdout before Serve: go-plugin uses it for the
// handshake.
//
// Unless GOGC is set, Serve raises the garbage collector's target to 400%:
// a plugin's heap is small and every call's garbage dies young, so fewer,
// later collections cost a few megabytes and save per-call CPU.
func Serve(p *Plugin) {
	if err := p.Check(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig:  Handshake,
		VersionedPlugins: map[int]plugin.PluginSet{pluginVersion: PluginSet(p)},
		GRPCServer:       NewGRPCServer,
	})
}

// NewGRPCServer is the gRPC server constructor Serve uses: go-plugin's
// options, message limits large enough for big batches, and an interceptor
// that turns a panic outside the per-item recovery into a gRPC Internal
// error instead of a dead process.
func NewGRPCServer(opts []grpc.ServerOption) *grpc.Server {
	opts = append(opts,
		grpc.ChainUnaryInterceptor(recoverInterceptor),
		// A batch carries every touched key's value; gRPC's 4 MiB default
		// would fail large batches. The host allows the same.
		grpc.MaxRecvMsgSize(maxMessage), grpc.MaxSendMsgSize(maxMessage))
	return grpc.NewServer(opts...)
}

func recoverInterceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, next grpc.UnaryHandler) (resp any, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = status.Errorf(codes.Internal, "sdk: %s panicked: %v\n%s", info.FullMethod, r, debug.Stack())
		}
	}()
	return next(ctx, req)
}

type grpcPlugin struct {
	plugin.NetRPCUnsupportedPlugin
	p *Plugin
}

func (g *grpcPlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	pb.RegisterHandlerServer(s, &server{p: g.p})
	return nil
}

func (g *grpcPlugin) GRPCClient(context.Context, *plugin.GRPCBroker, *grpc.ClientConn) (any, error) {
	return nil, fmt.Errorf("sdk: the plugin side has no client")
}

type server struct {
	pb.UnimplementedHandlerServer
	p *Plugin
}

func (s *server) Describe(_ context.Context, req *pb.DescribeRequest) (*pb.DescribeResponse, error) {
	return &pb.DescribeResponse{
		Name:            s.p.Name,
		Version:         s.p.Version,
		Types:           s.p.Types(),
		Fingerprint:     s.p.fingerprint(),
		ProtocolVersion: pluginVersion,
	}, nil
}

func (s *server) Evaluate(ctx context.Context, req *pb.EvaluateRequest) (*pb.EvaluateResponse, error) {
	items := make([]Item, len(req.Items))
	nrec := 0
	for _, it := range req.Items {
		nrec += len(it.State)
	}
	recs := make([]kv.Record, 0, nrec)
	for i, it := range req.Items {
		start := len(recs)
		for _, r := range it.State {
			recs = append(recs, kv.Record{Key: r.Key, Value: r.Value, Rev: r.Rev})
		}
		items[i] = Item{Type: it.Type, ID: it.Id, Payload: it.Payload, State: recs[start:len(recs):len(recs)]}
	}
	results := s.p.Evaluate(ctx, items)
	return &pb.EvaluateResponse{Results: ResultsToProto(results)}, nil
}

// ResultsToProto encodes results for the wire.
func ResultsToProto(results []Result) []*pb.Result {
	out := make([]*pb.Result, len(results))
	for i := range results {
		r := &results[i]
		pr := &pb.Result{Result: r.Result, NeedKeys: r.NeedKeys}
		if len(r.Writes) > 0 {
			pr.Writes = make([]*pb.Write, len(r.Writes))
			for j, w := range r.Writes {
				pr.Writes[j] = &pb.Write{Key: w.Key, Value: w.Value, Delete: w.Delete, IfRev: w.IfRev}
			}
		}
		if len(r.Transitions) > 0 {
			pr.Transitions = make([]*pb.Transition, len(r.Transitions))
			for j, t := range r.Transitions {
				pr.Transitions[j] = &pb.Transition{Machine: t.Machine, Key: t.Key, To: t.To}
			}
		}
		if r.Err != nil {
			pr.Error = &pb.Error{Kind: pb.ErrorKind(r.Err.Kind), Message: r.Err.Msg}
		}
		out[i] = pr
	}
	return out
}
