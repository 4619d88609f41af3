package config

import "fmt"

// joinFix is the fix an empty or impossible join names: the two ways a
// node may come up on persistent storage.
const joinFix = "list the gossip addresses (host:port) of running members, or remove join and pass --bootstrap (bootstrap: true) to start a new cluster"

// joinAndBootstrap reads join and bootstrap. A join that was set but holds
// no address (--join "", --join ",", WRIT_JOIN="", join: [""]) is an error
// rather than an implied bootstrap: it is almost always an unset seed
// variable, and bootstrapping would found a second cluster. A node on a
// temporary data directory never joins: it would become a voter whose log
// vanishes when it stops.
func (s source) joinAndBootstrap(n *Node) error {
	var err error
	if n.Join, err = s.list("join"); err != nil {
		return err
	}
	for _, j := range n.Join {
		if err := CheckAddr(j, false); err != nil {
			return s.fail("join", err.Error(), "list gossip addresses as host:port")
		}
	}
	if _, set := s.from["join"]; set && len(n.Join) == 0 {
		return s.fail("join", "is set but lists no address", joinFix)
	}
	if n.Bootstrap, err = s.boolean("bootstrap"); err != nil {
		return err
	}
	if n.Bootstrap && len(n.Join) > 0 {
		return s.fail("bootstrap", fmt.Sprintf("is set together with join (%d seed(s)): a node either starts a new cluster or joins one", len(n.Join)), "drop bootstrap to join the cluster at the seeds, or drop join to start a new cluster")
	}
	if len(n.Join) > 0 && n.DataDir == "" {
		return s.fail("join", fmt.Sprintf("%d seed(s) given but data_dir is empty: a node on a temporary data directory cannot join a cluster as a voter", len(n.Join)), "set data_dir to a persistent directory")
	}
	if len(n.Join) == 0 {
		// No join at all: a new one-node cluster (the zero-config dev
		// mode, or the first node of a cluster).
		n.Bootstrap = true
	}
	return nil
}
