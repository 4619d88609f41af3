package raftstore

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// clusterIDFile holds the cluster ID in the data directory (hex, one line).
const clusterIDFile = "cluster_id"

// clusterID is the ID every transport stream carries and checks, like
// etcd's X-Etcd-Cluster-ID: two clusters that can reach each other never
// exchange messages. It is derived when a cluster is bootstrapped and
// persisted; a joining node adopts the ID of the first peer that streams to
// it. Zero: not known yet (checks nothing).
type clusterID struct {
	v    atomic.Uint64
	path string
	mu   sync.Mutex
}

func loadClusterID(dataDir string) (*clusterID, error) {
	c := &clusterID{path: filepath.Join(dataDir, clusterIDFile)}
	b, err := os.ReadFile(c.path)
	if errors.Is(err, os.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return nil, fmt.Errorf("raftstore: read cluster ID: %w", err)
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 16, 64)
	if err != nil || v == 0 {
		return nil, fmt.Errorf("raftstore: %s: not a cluster ID (%q); restore it from another member's data directory", c.path, strings.TrimSpace(string(b)))
	}
	c.v.Store(v)
	return c, nil
}

func (c *clusterID) get() uint64 { return c.v.Load() }

// adopt records id if no ID is known yet; it reports whether it did.
func (c *clusterID) adopt(id uint64) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.v.Load() != 0 || id == 0 {
		return false, nil
	}
	if c.path == "" {
		c.v.Store(id)
		return true, nil
	}
	if err := writeFileSync(c.path, []byte(fmt.Sprintf("%016x\n", id))); err != nil {
		return false, fmt.Errorf("raftstore: persist cluster ID: %w", err)
	}
	c.v.Store(id)
	return true, nil
}

// deriveClusterID names a cluster bootstrapped with peers: every node of a
// static configuration derives the same ID from the same list; a
// single-node bootstrap draws a random one (nothing else must agree on it).
func deriveClusterID(peers []Peer) uint64 {
	if len(peers) <= 1 {
		var b [8]byte
		if _, err := rand.Read(b[:]); err == nil {
			if v := binary.LittleEndian.Uint64(b[:]); v != 0 {
				return v
			}
		}
	}
	ps := append([]Peer(nil), peers...)
	sort.Slice(ps, func(i, j int) bool { return ps[i].ID < ps[j].ID })
	h := fnv.New64a()
	for _, p := range ps {
		h.Write([]byte(p.ID + "\x00" + p.Addr + "\x00"))
	}
	if v := h.Sum64(); v != 0 {
		return v
	}
	return 1
}

// writeFileSync replaces path (0600) with b, synced, atomically.
func writeFileSync(path string, b []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// openClusterID loads the persisted cluster ID; a node bootstrapping a
// cluster derives and persists it first.
func (n *Node) openClusterID(bootstrap bool, peers []Peer, addr string) (*clusterID, error) {
	c, err := loadClusterID(n.cfg.DataDir)
	if err != nil {
		return nil, err
	}
	if bootstrap && c.get() == 0 {
		if len(n.cfg.Peers) == 0 {
			peers = []Peer{{ID: n.cfg.NodeID, Addr: addr}}
		}
		if _, err := c.adopt(deriveClusterID(peers)); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// ClusterID is the cluster's ID in hex ("" while a joiner has not heard
// from the cluster yet).
func (n *Node) ClusterID() string {
	if n.tr == nil || n.tr.cluster.get() == 0 {
		return ""
	}
	return fmt.Sprintf("%016x", n.tr.cluster.get())
}

// syncMembers gives the transport the member set at start: the members
// applied so far, or the static peers of a node bootstrapping them.
func (n *Node) syncMembers(peers []Peer, bootstrap bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.members) == 0 && bootstrap {
		ids := make([]uint64, 0, len(peers))
		for _, p := range peers {
			ids = append(ids, RaftID(p.ID))
		}
		n.net.syncMembers(ids)
		return
	}
	n.syncMembersLocked()
}

// syncMembersLocked gives the transport the member table; n.mu held.
func (n *Node) syncMembersLocked() {
	ids := make([]uint64, 0, len(n.members))
	for id := range n.members {
		ids = append(ids, id)
	}
	n.net.syncMembers(ids)
}
