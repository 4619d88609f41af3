package sdk

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
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
// handshake. Serve tunes the Go runtime for a plugin process first (see
// TuneRuntime).
func Serve(p *Plugin) {
	if err := p.Check(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	TuneRuntime()
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig:  Handshake,
		VersionedPlugins: map[int]plugin.PluginSet{pluginVersion: PluginSet(p)},
		GRPCServer:       NewGRPCServer,
	})
}

// TuneRuntime sets the Go runtime up for a plugin process; Serve calls it.
// It is exported for programs that assemble their own plugin.ServeConfig.
//
// Unless GOMAXPROCS is set in the environment, the plugin runs Go code on
// one thread at a time (GOMAXPROCS=1). A call is a relay of goroutines
// (connection reader, handler, gRPC's writer), and with a second idle P the
// runtime wakes another OS thread at nearly every hand-off to look for
// work. On a small machine, where the node needs the other cores anyway,
// those futex wake-ups and context switches cost more per call than
// evaluating a batch on two cores saves, and they make a lone call two to
// three times slower. Set GOMAXPROCS for the node (plugins inherit it) to
// evaluate large batches on several cores.
//
// Unless GOGC is set, it raises the garbage collector's target to 400%: a
// plugin's heap is small and every call's garbage dies young, so fewer,
// later collections cost a few megabytes and save per-call CPU.
func TuneRuntime() {
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(1)
	}
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
}

// NewGRPCServer is the gRPC server constructor Serve uses: go-plugin's
// options, message limits large enough for big batches, a fixed flow
// window (pluginproto.FlowWindow), and an interceptor that turns a panic in
// a unary call into a gRPC Internal error instead of a dead process
// (evaluation streams recover per batch, and handlers per item).
func NewGRPCServer(opts []grpc.ServerOption) *grpc.Server {
	opts = append(opts,
		grpc.ChainUnaryInterceptor(recoverInterceptor),
		// A batch carries every touched key's value; gRPC's 4 MiB default
		// would fail large batches. The host allows the same.
		grpc.MaxRecvMsgSize(maxMessage), grpc.MaxSendMsgSize(maxMessage),
		grpc.InitialWindowSize(pb.FlowWindow), grpc.InitialConnWindowSize(pb.FlowWindow))
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

// Evaluate serves one evaluation stream: a response for each request, in
// order, until the host closes or cancels the stream. Handlers get the
// stream's context, which the host cancels when it abandons a batch.
func (s *server) Evaluate(stream pb.Handler_EvaluateServer) error {
	ctx := stream.Context()
	// The stream's batches are answered one at a time, so they share one
	// set of per-batch buffers: gRPC has encoded a response by the time
	// Send returns, and nothing of a batch is used after that.
	var sc streamScratch
	for {
		req, err := stream.Recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		resp, err := s.evaluateWith(ctx, req, &sc)
		if err != nil {
			return err
		}
		if err := stream.Send(resp); err != nil {
			return err
		}
	}
}

// streamScratch is what one evaluation stream reuses from batch to batch.
type streamScratch struct {
	items []Item
	recs  []kv.Record
	eval  scratch
	resp  []byte
}

// A stream keeps its buffers between batches up to these sizes: bytes of
// the response, and items or records.
const (
	maxReusedBytes = 1 << 20
	maxReusedItems = 1 << 14
)

// evaluate answers one packed batch. A panic outside the per-item recovery
// (in decoding or encoding) fails the batch with a gRPC Internal error
// instead of killing the process.
func (s *server) evaluate(ctx context.Context, req *pb.EvaluateRequest) (resp *pb.EvaluateResponse, err error) {
	var sc streamScratch
	return s.evaluateWith(ctx, req, &sc)
}

// evaluateWith is evaluate reusing sc's buffers; the response aliases sc
// until the next call with it.
func (s *server) evaluateWith(ctx context.Context, req *pb.EvaluateRequest, sc *streamScratch) (resp *pb.EvaluateResponse, err error) {
	defer func() {
		if r := recover(); r != nil {
			*sc = streamScratch{}
			resp, err = nil, status.Errorf(codes.Internal, "sdk: evaluate panicked: %v\n%s", r, debug.Stack())
		}
	}()
	items, err := decodeItemsInto(req.Items, sc)
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "sdk: evaluate: %v", err)
	}
	results := s.p.evaluate(ctx, items, &sc.eval)
	size := resultsSize(results)
	if cap(sc.resp) < size {
		sc.resp = make([]byte, 0, size)
	}
	b := appendResults(sc.resp[:0], results)
	sc.resp = b
	if cap(b) > maxReusedBytes {
		sc.resp = nil
	}
	// A stream does not keep the buffers of an exceptionally large batch
	// for its whole life.
	if cap(sc.items) > maxReusedItems || cap(sc.recs) > maxReusedItems {
		sc.items, sc.recs, sc.eval = nil, nil, scratch{}
	}
	return &pb.EvaluateResponse{Results: b}, nil
}

// decodeItems decodes a packed request (pluginproto's batch codec) into
// items with few allocations: one slice of items, one of records, and one
// string that every type, ID and key is a substring of. Payloads and values
// alias b.
func decodeItems(b []byte) ([]Item, error) {
	var sc streamScratch
	return decodeItemsInto(b, &sc)
}

// decodeItemsInto is decodeItems reusing sc's item and record slices.
func decodeItemsInto(b []byte, sc *streamScratch) ([]Item, error) {
	d := pb.NewDecoder(b, true)
	n := d.Count("item count", pb.MinItem)
	if cap(sc.items) < n {
		sc.items = make([]Item, n)
	}
	items := sc.items[:n]
	recs := sc.recs[:0]
	for i := range items {
		it := &items[i]
		it.Type = d.String("type")
		it.ID = d.String("id")
		it.Payload = d.Bytes("payload")
		ns := d.Count("state count", pb.MinRecord)
		if d.Err() != nil {
			break
		}
		if cap(recs)-len(recs) < ns {
			// Most batches fit the first guess: the remaining input
			// holds at most this many records. Earlier items keep the
			// slice they were given.
			recs = make([]kv.Record, 0, max(ns, min(len(b)/16, ns*(n-i))))
		}
		start := len(recs)
		for range ns {
			recs = append(recs, kv.Record{Key: d.String("key"), Value: d.Bytes("value"), Rev: d.Uvarint("rev")})
		}
		it.State = recs[start:len(recs):len(recs)]
	}
	if cap(recs) > cap(sc.recs) {
		sc.recs = recs
	}
	if err := d.Done(); err != nil {
		return nil, err
	}
	return items, nil
}

// resultsSize estimates the packed size of results, to allocate once.
func resultsSize(results []Result) int {
	n := 8
	for i := range results {
		r := &results[i]
		n += 8 + len(r.Result)
		for _, w := range r.Writes {
			n += 16 + len(w.Key) + len(w.Value)
		}
		for _, t := range r.Transitions {
			n += 6 + len(t.Machine) + len(t.Key) + len(t.To)
		}
		for _, k := range r.NeedKeys {
			n += 2 + len(k)
		}
		if r.Err != nil {
			n += 4 + len(r.Err.Msg)
		}
	}
	return n
}

// appendResults encodes results for the wire (pluginproto's batch codec).
// An error wins over anything else a result carries, and a request for
// keys over an effect.
func appendResults(dst []byte, results []Result) []byte {
	dst = pb.AppendUvarint(dst, uint64(len(results)))
	for i := range results {
		r := &results[i]
		switch {
		case r.Err != nil:
			dst = pb.AppendError(dst, byte(r.Err.Kind), r.Err.Msg)
		case len(r.NeedKeys) > 0:
			dst = append(dst, pb.TagNeedKeys)
			dst = pb.AppendUvarint(dst, uint64(len(r.NeedKeys)))
			for _, k := range r.NeedKeys {
				dst = pb.AppendString(dst, k)
			}
		default:
			dst = append(dst, pb.TagEffect)
			dst = pb.AppendUvarint(dst, uint64(len(r.Writes)))
			for _, w := range r.Writes {
				dst = pb.AppendWrite(dst, w.Key, w.Value, w.Delete, w.IfRev)
			}
			dst = pb.AppendBytes(dst, r.Result)
			dst = pb.AppendUvarint(dst, uint64(len(r.Transitions)))
			for _, t := range r.Transitions {
				dst = pb.AppendTransition(dst, t.Machine, t.Key, t.To)
			}
		}
	}
	return dst
}
