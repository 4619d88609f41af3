package raftstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	grpcpeer "google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/writ-dev/writ/pki"
)

// The peer transport is one gRPC service with a single client-streaming
// method. Each node keeps one outgoing stream per peer; a frame carries a
// batch of raft messages:
//
//	frame = count:uvarint (len:uvarint message-protobuf)*count
//
// Frames use a raw-bytes codec, so no generated code is needed. The stream
// header carries the sender's raft ID and address, which lets a joiner reply
// to a leader it has not yet learned about from the log, and the cluster
// ID. Peer authentication, the cluster ID and the member check are in
// peerauth.go.

const (
	transportService = "writ.raftstore.v1.Transport"
	transportMethod  = "/" + transportService + "/Stream"
	mdFromID         = "writ-from-id"
	mdFromAddr       = "writ-from-addr"
	backoffMin       = 20 * time.Millisecond
	backoffMax       = time.Second
	removeGrace      = 2 * time.Second
	snapInterval     = 500 * time.Millisecond
	propQueue        = 1024
	propTimeout      = 200 * time.Millisecond
	// flowWindow is the HTTP/2 flow-control window per stream and
	// connection. A fixed window turns off gRPC's bandwidth estimation,
	// whose pings and window updates cost wake-ups on every stream.
	flowWindow = 8 << 20
)

// marshalCached marshals a message whose size was just computed by
// proto.Size, without computing it again.
var marshalCached = proto.MarshalOptions{UseCachedSize: true}

type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) {
	b, ok := v.(*[]byte)
	if !ok {
		return nil, fmt.Errorf("raftstore: transport codec: cannot marshal %T", v)
	}
	return *b, nil
}

func (rawCodec) Unmarshal(data []byte, v any) error {
	b, ok := v.(*[]byte)
	if !ok {
		return fmt.Errorf("raftstore: transport codec: cannot unmarshal into %T", v)
	}
	*b = append((*b)[:0], data...)
	return nil
}

func (rawCodec) Name() string { return "writ-raw" }

// raftHandler is what the transport needs from the node.
type raftHandler interface {
	// check refuses a malformed message (an error wrapping errMalformed)
	// before it is queued or stepped.
	check(m *raftpb.Message) error
	step(ctx context.Context, m *raftpb.Message) error
	reportUnreachable(id uint64)
	reportSnapshot(id uint64, status raft.SnapshotStatus)
	// fillSnapshot gives an outgoing MsgSnap the state it carries.
	fillSnapshot(m *raftpb.Message) error
	// removedByPeer handles a peer's notice that it removed a member
	// with this node's ID (removalnotice.go).
	removedByPeer(peer uint64, r removal)
}

type transport struct {
	self     uint64
	addr     string // advertised (actual listen) address
	localIP  net.IP // bind outgoing connections to this address
	queueLen int
	maxBatch int
	maxFrame int // largest frame received or sent
	maxSnap  int // largest snapshot sent or received (in chunks)
	// snapHeld is the bytes of partly received snapshots on all streams.
	snapHeld atomic.Int64
	h        raftHandler
	log      *slog.Logger
	metrics  Metrics // nil: not measured
	// drop, if set (tests only, before the first send), drops outgoing
	// messages it returns true for, like a lost packet.
	drop func(m *raftpb.Message) bool

	// tls, if set, authenticates every connection both ways (peerauth.go).
	tls     *pki.Reloader
	cluster *clusterID
	// members is the member set messages are admitted from (admit).
	members atomic.Pointer[map[uint64]struct{}]

	lis net.Listener
	srv *grpc.Server

	mu       sync.Mutex
	peers    map[uint64]*peer
	removed  map[uint64]removal
	draining map[*peer]bool
	closed   bool
	wg       sync.WaitGroup
}

// peerSecurity is how a transport authenticates peers: TLS (nil:
// plaintext) and the cluster ID (nil: none known, kept in memory).
type peerSecurity struct {
	tls     *pki.Reloader
	cluster *clusterID
}

// transportLimits bounds a transport: the per-peer send queue, a batch of
// messages (and a snapshot chunk), a frame and a snapshot.
type transportLimits struct {
	queue, batch, frame, snapshot int
}

func newTransport(self uint64, lis net.Listener, lim transportLimits, h raftHandler, log *slog.Logger, sec peerSecurity) *transport {
	if lim.snapshot <= 0 {
		lim.snapshot = defaultMaxSnapshotBytes
	}
	t := &transport{
		self: self, addr: lis.Addr().String(), queueLen: lim.queue, maxBatch: lim.batch, maxFrame: lim.frame, maxSnap: lim.snapshot,
		h: h, log: log, lis: lis, tls: sec.tls, cluster: sec.cluster,
		peers: map[uint64]*peer{}, removed: map[uint64]removal{}, draining: map[*peer]bool{},
	}
	if t.cluster == nil {
		t.cluster = &clusterID{}
	}
	if ta, ok := lis.Addr().(*net.TCPAddr); ok && !ta.IP.IsUnspecified() {
		t.localIP = ta.IP
	}
	opts := []grpc.ServerOption{grpc.ForceServerCodec(rawCodec{}), grpc.MaxRecvMsgSize(lim.frame),
		grpc.InitialWindowSize(flowWindow), grpc.InitialConnWindowSize(flowWindow)}
	if t.tls != nil {
		opts = append(opts, grpc.Creds(t.serverCreds()))
	}
	t.srv = grpc.NewServer(opts...)
	t.srv.RegisterService(&grpc.ServiceDesc{
		ServiceName: transportService,
		HandlerType: (*any)(nil),
		Streams: []grpc.StreamDesc{{
			StreamName:    "Stream",
			Handler:       func(_ any, ss grpc.ServerStream) error { return t.serve(ss) },
			ClientStreams: true,
		}},
	}, t)
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		if err := t.srv.Serve(lis); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			t.log.Error("raftstore: transport server stopped", "err", err)
		}
	}()
	return t
}

// serve receives frames from one peer and steps every message into raft.
// A frame over maxFrame is refused from its length prefix (gRPC checks it
// before reading the message); a frame that does not decode, a message
// that is malformed or that raft refuses with a panic ends the stream,
// logged with the source address. Nothing received can crash the node.
func (t *transport) serve(ss grpc.ServerStream) (err error) {
	ctx := ss.Context()
	src := "unknown"
	if p, ok := grpcpeer.FromContext(ctx); ok && p.Addr != nil {
		src = p.Addr.String()
	}
	defer func() {
		if p := recover(); p != nil {
			t.log.Warn("raftstore: transport: dropping stream: receiving it panicked", "source", src, "panic", p)
			err = status.Errorf(codes.InvalidArgument, "raftstore: malformed frame")
		}
	}()
	auth, err := t.authStream(ctx, src)
	if err != nil {
		return status.Error(codes.PermissionDenied, err.Error())
	}
	if notice, ok := t.removedNotice(ss, auth.from); ok {
		t.log.Info("raftstore: transport: telling a removed member it was removed", "source", src, "from", auth.from)
		return notice
	}
	rs := &recvStream{t: t, ctx: ctx, ss: ss, src: src, auth: auth}
	// Forwarded proposals are stepped off the stream: a handler may hold a
	// proposal while this node knows no leader (a restarted node receiving
	// proposals queued for it while it was the leader), and the heartbeats
	// that would tell it the leader arrive behind them on this stream.
	rs.props = make(chan *raftpb.Message, propQueue)
	defer close(rs.props)
	go t.stepProposals(ctx, rs.props, src)
	rs.snap = snapAssembly{held: &t.snapHeld, limit: int64(t.maxSnap)}
	defer rs.snap.release()
	var frame []byte
	for {
		if err := ss.RecvMsg(&frame); err != nil {
			if status.Code(err) == codes.ResourceExhausted {
				t.log.Warn("raftstore: transport: dropping stream: frame over MaxFrameBytes refused", "source", src, "max_frame_bytes", t.maxFrame, "err", err)
				return err
			}
			return nil
		}
		if isChunkFrame(frame) {
			if err := rs.chunk(frame); err != nil {
				return streamEnd(err)
			}
			continue
		}
		if rs.snap.active {
			t.log.Warn("raftstore: transport: dropping stream: a message frame inside a chunked snapshot", "source", src, "peer", auth.from)
			return status.Error(codes.InvalidArgument, "raftstore: message frame inside a chunked snapshot")
		}
		msgs, err := decodeFrame(frame)
		if err != nil {
			t.log.Warn("raftstore: transport: dropping stream: malformed frame", "source", src, "err", err)
			return status.Error(codes.InvalidArgument, err.Error())
		}
		if len(msgs) > 0 {
			t.mreceived(msgs[0].GetFrom(), len(msgs), len(frame))
		}
		for _, m := range msgs {
			if err := rs.handle(m); err != nil {
				return streamEnd(err)
			}
		}
	}
}

// errStreamDone ends a stream quietly: raft stopped.
var errStreamDone = errors.New("raftstore: transport: stream done")

// streamEnd is the status a stream handler returns for err.
func streamEnd(err error) error {
	if errors.Is(err, errStreamDone) {
		return nil
	}
	return err
}

// recvStream is the receiving end of one peer stream.
type recvStream struct {
	t         *transport
	ctx       context.Context
	ss        grpc.ServerStream
	src       string
	auth      streamAuth
	props     chan *raftpb.Message
	snap      snapAssembly
	nonMember bool
}

// chunk adds a snapshot chunk frame; the chunk that completes a snapshot
// hands it to handle. A bad chunk, or chunks from a non-member, end the
// stream.
func (rs *recvStream) chunk(frame []byte) error {
	t := rs.t
	if !rs.snap.active && rs.auth.from != 0 && !t.admit(rs.auth.from) {
		t.log.Warn("raftstore: transport: dropping stream: snapshot chunks from a non-member", "source", rs.src, "from", rs.auth.from)
		return status.Error(codes.PermissionDenied, "raftstore: snapshot from a non-member")
	}
	c, err := decodeChunk(frame)
	if err == nil {
		var m *raftpb.Message
		if m, err = rs.snap.add(c); err == nil {
			if m == nil {
				return nil
			}
			t.mreceived(m.GetFrom(), 1, int(c.total))
			return rs.handle(m)
		}
	}
	t.log.Warn("raftstore: transport: dropping stream: refused snapshot chunk", "source", rs.src, "from", rs.auth.from, "err", err)
	if errors.Is(err, errSnapshotBudget) {
		return status.Error(codes.ResourceExhausted, err.Error())
	}
	return status.Error(codes.InvalidArgument, err.Error())
}

// handle checks one received message and steps it into raft. An error
// ends the stream; it has been logged.
func (rs *recvStream) handle(m *raftpb.Message) error {
	t, src, auth := rs.t, rs.src, rs.auth
	if auth.from != 0 && m.GetFrom() != auth.from {
		t.log.Warn("raftstore: transport: dropping stream: message not from the authenticated peer", "source", src, "type", m.GetType().String(), "from", m.GetFrom(), "peer", auth.from, "peer_node", auth.node)
		return status.Error(codes.PermissionDenied, "raftstore: message From is not the authenticated peer")
	}
	if err := t.h.check(m); err != nil {
		t.log.Warn("raftstore: transport: dropping stream: refused message", "source", src, "type", m.GetType().String(), "from", m.GetFrom(), "err", err)
		return status.Error(codes.InvalidArgument, err.Error())
	}
	if !t.admit(m.GetFrom()) {
		// A member this node removed is told so, which ends the stream;
		// anything else that is not a member (yet) is dropped, the first
		// of each stream logged.
		if notice, ok := t.removedNotice(rs.ss, m.GetFrom()); ok {
			t.log.Info("raftstore: transport: telling a removed member it was removed", "source", src, "type", m.GetType().String(), "from", m.GetFrom())
			return notice
		}
		if !rs.nonMember {
			t.log.Warn("raftstore: transport: dropping messages from a non-member", "source", src, "type", m.GetType().String(), "from", m.GetFrom())
			rs.nonMember = true
		}
		return nil
	}
	if m.GetType() == raftpb.MsgProp {
		select {
		case rs.props <- m:
		default:
			// Like a follower without a leader, drop it: the
			// proposer's wait times out and it retries.
		}
		return nil
	}
	if err := t.h.step(rs.ctx, m); err != nil {
		if errors.Is(err, errMalformed) {
			t.log.Warn("raftstore: transport: dropping stream: refused message", "source", src, "type", m.GetType().String(), "from", m.GetFrom(), "err", err)
			return status.Error(codes.InvalidArgument, err.Error())
		}
		return errStreamDone
	}
	return nil
}

// stepProposals steps forwarded proposals, each given at most propTimeout
// to be accepted; a proposal that finds no leader in time is dropped.
func (t *transport) stepProposals(ctx context.Context, props <-chan *raftpb.Message, src string) {
	for m := range props {
		if ctx.Err() != nil {
			continue
		}
		pctx, cancel := context.WithTimeout(ctx, propTimeout)
		if err := t.h.step(pctx, m); errors.Is(err, errMalformed) {
			t.log.Warn("raftstore: transport: refused proposal", "source", src, "from", m.GetFrom(), "err", err)
		}
		cancel()
	}
}

func decodeFrame(b []byte) ([]*raftpb.Message, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)) {
		return nil, errors.New("raftstore: transport frame: bad count")
	}
	b = b[k:]
	msgs := make([]*raftpb.Message, 0, n)
	for i := uint64(0); i < n; i++ {
		mb, rest, ok := readLP(b)
		if !ok {
			return nil, fmt.Errorf("raftstore: transport frame: message %d: bad length", i)
		}
		m := &raftpb.Message{}
		if err := proto.Unmarshal(mb, m); err != nil {
			return nil, fmt.Errorf("raftstore: transport frame: message %d: %w", i, err)
		}
		msgs = append(msgs, m)
		b = rest
	}
	return msgs, nil
}

// learnPeer records the address a peer announced in its stream header: a
// joiner learns the leader this way. A header never re-points a peer this
// node already knows (its address comes from the log), and removed peers
// are not re-added. It reports whether the peer was added.
func (t *transport) learnPeer(id uint64, addr string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, gone := t.removed[id]; gone || id == t.self || addr == "" {
		return false
	}
	if _, ok := t.peers[id]; ok {
		return false
	}
	t.addPeerLocked(id, addr)
	return true
}

// kickPeer cuts short the reconnect backoff of the stream to a peer.
func (t *transport) kickPeer(id uint64) {
	t.mu.Lock()
	p := t.peers[id]
	t.mu.Unlock()
	if p != nil {
		select {
		case p.kick <- struct{}{}:
		default:
		}
	}
}

// setPeer adds a peer or updates its address.
func (t *transport) setPeer(id uint64, addr string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if id == t.self {
		return
	}
	delete(t.removed, id)
	if p, ok := t.peers[id]; ok {
		if p.addr == addr {
			return
		}
		p.stop()
		delete(t.peers, id)
	}
	t.addPeerLocked(id, addr)
}

func (t *transport) addPeerLocked(id uint64, addr string) {
	if t.closed || addr == "" {
		return
	}
	p := &peer{t: t, id: id, addr: addr, q: make(chan *raftpb.Message, t.queueLen), done: make(chan struct{}), kick: make(chan struct{}, 1)}
	t.peers[id] = p
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		p.run()
	}()
}

// removePeer stops sending to a removed member after a grace period, so
// that messages already queued (notably the one that tells it the removal
// committed) still reach it. r names the removed incarnation, for the
// notice its later streams get (removalnotice.go).
func (t *transport) removePeer(id uint64, r removal) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.removed[id] = r
	if p, ok := t.peers[id]; ok {
		delete(t.peers, id)
		t.draining[p] = true
		time.AfterFunc(removeGrace, func() {
			t.mu.Lock()
			delete(t.draining, p)
			t.mu.Unlock()
			p.stop()
		})
	}
}

// send queues messages without blocking; a full queue drops the message
// and tells raft the peer is unreachable (raft retries).
func (t *transport) send(msgs []*raftpb.Message) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, m := range msgs {
		to := m.GetTo()
		p, ok := t.peers[to]
		if !ok || t.drop != nil && t.drop(m) {
			t.h.reportUnreachable(to)
			if m.GetType() == raftpb.MsgSnap {
				t.h.reportSnapshot(to, raft.SnapshotFailure)
			}
			continue
		}
		if m.GetType() == raftpb.MsgSnap {
			// At most one snapshot per peer per snapInterval: a follower
			// that keeps refusing snapshots must not make the leader
			// serialize and ship its whole state in a tight loop.
			if time.Since(p.lastSnap) < snapInterval {
				t.h.reportSnapshot(to, raft.SnapshotFailure)
				continue
			}
			p.lastSnap = time.Now()
		}
		select {
		case p.q <- m:
		default:
			t.h.reportUnreachable(to)
			if m.GetType() == raftpb.MsgSnap {
				t.h.reportSnapshot(to, raft.SnapshotFailure)
			}
		}
	}
}

func (t *transport) close() {
	t.mu.Lock()
	t.closed = true
	for id, p := range t.peers {
		p.stop()
		delete(t.peers, id)
	}
	for p := range t.draining {
		p.stop()
		delete(t.draining, p)
	}
	t.mu.Unlock()
	t.srv.Stop()
	t.wg.Wait()
}
