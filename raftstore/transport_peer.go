package raftstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	wbackoff "github.com/writ-dev/writ/internal/backoff"
)

// The outgoing side of the peer transport: one goroutine and one stream
// per peer, reconnecting with backoff, sending batched frames.

type peer struct {
	t    *transport
	id   uint64
	addr string
	q    chan *raftpb.Message
	once sync.Once
	done chan struct{}
	// kick wakes a reconnect backoff: the peer just connected to us.
	kick chan struct{}
	// lastSnap is when a snapshot was last queued (guarded by t.mu).
	lastSnap time.Time
	// lastAuthErr is the last TLS failure logged (run's goroutine only).
	lastAuthErr string
}

func (p *peer) stop() { p.once.Do(func() { close(p.done) }) }

func (p *peer) run() {
	dialer := &net.Dialer{Timeout: 2 * time.Second}
	if p.t.localIP != nil {
		dialer.LocalAddr = &net.TCPAddr{IP: p.t.localIP}
	}
	creds := insecure.NewCredentials()
	if p.t.tls != nil {
		creds = p.t.clientCreds(p.id)
	}
	conn, err := grpc.NewClient("passthrough:///"+p.addr,
		grpc.WithTransportCredentials(creds),
		grpc.WithInitialWindowSize(flowWindow), grpc.WithInitialConnWindowSize(flowWindow),
		grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) {
			return dialer.DialContext(ctx, "tcp", a)
		}),
		grpc.WithDefaultCallOptions(grpc.ForceCodec(rawCodec{}), grpc.MaxCallSendMsgSize(p.t.maxFrame)),
		// gRPC's own reconnect backoff (default up to 120 s) must not
		// outlast ours: a restarted peer would hear nothing from us.
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: backoffMin, Multiplier: 1.6, Jitter: 0.2, MaxDelay: backoffMax},
			MinConnectTimeout: 2 * time.Second,
		}),
	)
	if err != nil {
		p.t.log.Error("raftstore: transport: bad peer address", "peer", p.id, "addr", p.addr, "err", err)
		return
	}
	defer conn.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-p.done
		cancel()
	}()
	// Reconnect delays double from backoffMin to backoffMax, jittered so
	// that streams cut together (a peer restarting) do not redial together.
	pol := wbackoff.Policy{Min: backoffMin, Max: backoffMax}
	var step time.Duration // zero: the next failure waits about backoffMin
	var pending []*raftpb.Message
	for {
		select {
		case <-p.done:
			return
		default:
		}
		// The cluster ID is read per stream: a joiner adopts it later.
		sctx := metadata.AppendToOutgoingContext(ctx, mdFromID, strconv.FormatUint(p.t.self, 10), mdFromAddr, p.t.addr)
		if cid := p.t.cluster.get(); cid != 0 {
			sctx = metadata.AppendToOutgoingContext(sctx, mdClusterID, strconv.FormatUint(cid, 16))
		}
		sctx, scancel := context.WithCancel(sctx)
		stream, err := conn.NewStream(sctx, &grpc.StreamDesc{StreamName: "Stream", ClientStreams: true}, transportMethod)
		if err == nil {
			err = p.stream(stream, &pending)
			step = 0
		}
		scancel()
		if ctx.Err() != nil {
			return
		}
		p.t.h.reportUnreachable(p.id)
		for _, m := range pending {
			if m.GetType() == raftpb.MsgSnap {
				p.t.h.reportSnapshot(p.id, raft.SnapshotFailure)
			}
		}
		pending = nil
		delay := pol.Next(&step)
		p.logStreamFailure(err, delay)
		select {
		case <-p.done:
			return
		case <-time.After(delay):
		case <-p.kick:
			conn.ResetConnectBackoff()
			step = 0
		}
	}
}

// stream runs one stream: it sends batches until the stream fails, the peer
// ends it or the peer stops. A peer that ends the stream with a removal
// notice (removalnotice.go) is heard.
func (p *peer) stream(stream grpc.ClientStream, pending *[]*raftpb.Message) error {
	// The receiving side answers only by ending the stream: wait for
	// that alongside the sends, so that an idle stream sees it too.
	ended := make(chan error, 1)
	go func() {
		var b []byte
		ended <- stream.RecvMsg(&b)
	}()
	err, heard := p.pump(stream, pending, ended)
	if !heard && errors.Is(err, io.EOF) {
		// A send found the stream ended: its status follows.
		t := time.NewTimer(streamEndWait)
		select {
		case err = <-ended:
			heard = true
		case <-t.C:
		}
		t.Stop()
	}
	if heard {
		if r, ok := readRemovedNotice(err, stream.Trailer()); ok {
			p.t.h.removedByPeer(p.id, r)
		}
	}
	return err
}

// streamEndWait bounds the wait for a peer's status after a send found
// its stream ended.
const streamEndWait = time.Second

// pump sends batches until the stream fails, the peer ends it (heard: err
// is the stream's status) or the peer stops.
func (p *peer) pump(stream grpc.ClientStream, pending *[]*raftpb.Message, ended <-chan error) (err error, heard bool) {
	defer func() { _ = stream.CloseSend() }()
	var sizes []int
	for {
		var first *raftpb.Message
		select {
		case <-p.done:
			return nil, false
		case err := <-ended:
			return err, true
		case first = <-p.q:
		}
		if !p.ready(first) {
			continue
		}
		batch := append((*pending)[:0], first)
		sizes = append(sizes[:0], proto.Size(first))
		size := sizes[0]
	drain:
		for size < p.t.maxBatch && len(batch) < 512 {
			select {
			case m := <-p.q:
				if !p.ready(m) {
					continue
				}
				batch = append(batch, m)
				sizes = append(sizes, proto.Size(m))
				size += sizes[len(sizes)-1]
			default:
				break drain
			}
		}
		*pending = batch
		if err := p.sendBatch(stream, batch, sizes); err != nil {
			return err, false
		}
		*pending = nil
	}
}

// sendBatch sends a batch in order: runs of messages as one frame each, and
// a snapshot larger than one batch in chunks (snapchunk.go).
func (p *peer) sendBatch(stream grpc.ClientStream, batch []*raftpb.Message, sizes []int) error {
	start := 0
	for i, m := range batch {
		if m.GetType() != raftpb.MsgSnap || sizes[i] <= p.t.maxBatch {
			continue
		}
		if err := p.sendFrame(stream, batch[start:i], sizes[start:i]); err != nil {
			return err
		}
		start = i + 1
		frames, total, err := chunkFrames(m, p.t.maxBatch)
		if err != nil {
			return err
		}
		for _, f := range frames {
			if err := stream.SendMsg(&f); err != nil {
				return err
			}
		}
		p.t.msent(p.id, 1, total)
		p.t.h.reportSnapshot(p.id, raft.SnapshotFinish)
	}
	return p.sendFrame(stream, batch[start:], sizes[start:])
}

// sendFrame sends messages as one frame (none: nothing).
func (p *peer) sendFrame(stream grpc.ClientStream, batch []*raftpb.Message, sizes []int) error {
	if len(batch) == 0 {
		return nil
	}
	size := 0
	for _, n := range sizes {
		size += n
	}
	// A fresh buffer per frame: the raw codec hands this slice to gRPC,
	// which may still be writing it after SendMsg returns. Messages are
	// marshalled straight into it, reusing the sizes computed when they
	// were batched.
	buf := binary.AppendUvarint(make([]byte, 0, size+binary.MaxVarintLen64*(len(batch)+1)), uint64(len(batch)))
	hasSnap := false
	for i, m := range batch {
		buf = binary.AppendUvarint(buf, uint64(sizes[i]))
		before := len(buf)
		var err error
		buf, err = marshalCached.MarshalAppend(buf, m)
		if err != nil {
			return fmt.Errorf("raftstore: transport: marshal: %w", err)
		}
		if len(buf)-before != sizes[i] {
			return fmt.Errorf("raftstore: transport: message %d changed size while queued (%d, now %d bytes)", i, sizes[i], len(buf)-before)
		}
		hasSnap = hasSnap || m.GetType() == raftpb.MsgSnap
	}
	if err := stream.SendMsg(&buf); err != nil {
		return err
	}
	p.t.msent(p.id, len(batch), len(buf))
	if hasSnap {
		p.t.h.reportSnapshot(p.id, raft.SnapshotFinish)
	}
	return nil
}

// ready prepares a dequeued message for the wire: a snapshot gets its data
// here, off the Ready loop. A snapshot that cannot be built is reported
// failed (raft tries again later) and reports false.
func (p *peer) ready(m *raftpb.Message) bool {
	if m.GetType() != raftpb.MsgSnap {
		return true
	}
	if err := p.t.h.fillSnapshot(m); err != nil {
		p.t.log.Warn("raftstore: transport: not sending snapshot", "peer", p.id, "err", err)
		p.t.h.reportSnapshot(p.id, raft.SnapshotFailure)
		return false
	}
	if size := proto.Size(m); size > p.t.maxSnap {
		p.t.log.Error("raftstore: transport: not sending snapshot: the state is larger than MaxSnapshotBytes; raise it on every node",
			"peer", p.id, "snapshot_bytes", size, "max_snapshot_bytes", p.t.maxSnap)
		p.t.h.reportSnapshot(p.id, raft.SnapshotFailure)
		return false
	}
	return true
}
