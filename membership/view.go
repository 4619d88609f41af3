package membership

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/hashicorp/serf/serf"
	"github.com/writ-dev/writ/kv"
)

// Raft roles as shown in View.
const (
	RaftVoter   = "voter"
	RaftLearner = "learner"
	RaftNone    = "" // not in the raft configuration
)

// MemberView is one row of `writctl members`: a node as gossip sees it side
// by side with its place in the raft configuration.
type MemberView struct {
	ID         string            `json:"id"`
	GossipAddr string            `json:"gossip_addr,omitempty"`
	Gossip     string            `json:"gossip"` // alive, leaving, left, failed or "" (unknown to gossip)
	Tags       map[string]string `json:"tags,omitempty"`
	Raft       string            `json:"raft"` // voter, learner or "" (not a member)
	Match      uint64            `json:"match,omitempty"`
	Refused    string            `json:"refused,omitempty"`
}

// View is the membership picture from one node.
type View struct {
	Self       string       `json:"self"`
	Leader     bool         `json:"leader"`
	Encrypted  bool         `json:"encrypted"`
	Members    []MemberView `json:"members"`
	Refused    []Refusal    `json:"refused,omitempty"`
	LastChange string       `json:"last_change,omitempty"`
	LastError  string       `json:"last_error,omitempty"`
	Waiting    string       `json:"waiting,omitempty"`
}

// View joins the gossip members with the raft configuration and the refused
// nodes.
func (a *Agent) View() View {
	gossip := a.gossip()
	a.mu.Lock()
	v := a.voters
	a.mu.Unlock()
	var raft []kv.Member
	leader := false
	if v != nil {
		raft = v.Members()
		leader = v.IsLeader()
	}
	refused := a.Refused()
	reason := make(map[string]string, len(refused))
	for _, r := range refused {
		reason[r.ID] = r.Reason
	}
	rows := make(map[string]*MemberView)
	for _, g := range gossip {
		rows[g.Name] = &MemberView{ID: g.Name, GossipAddr: g.Addr, Gossip: g.Status, Tags: g.Tags}
	}
	for _, m := range raft {
		r, ok := rows[m.ID]
		if !ok {
			r = &MemberView{ID: m.ID}
			rows[m.ID] = r
		}
		r.Raft = RaftLearner
		if m.Voter {
			r.Raft = RaftVoter
		}
		r.Match = m.Match
	}
	out := View{Self: a.cfg.NodeID, Leader: leader, Encrypted: a.serf.EncryptionEnabled(), Refused: refused}
	for id, r := range rows {
		if r.Raft == RaftNone || strings.HasPrefix(reason[id], refusedSchemaPrefix) {
			r.Refused = reason[id]
		}
		out.Members = append(out.Members, *r)
	}
	sort.Slice(out.Members, func(i, j int) bool { return out.Members[i].ID < out.Members[j].ID })
	a.mu.Lock()
	out.LastChange, out.LastError, out.Waiting = a.lastChange, a.lastError, a.waiting
	a.mu.Unlock()
	return out
}

// KeyReport is the cluster-wide result of a keyring operation.
type KeyReport struct {
	// NumNodes is how many members gossip knows; NumResp how many answered;
	// NumErr how many reported an error.
	NumNodes, NumResp, NumErr int
	// Messages holds per-node error messages.
	Messages map[string]string
	// Keys maps each base64 key to the number of nodes that have it;
	// PrimaryKeys the same for the key each node encrypts with (ListKeys
	// only).
	Keys        map[string]int
	PrimaryKeys map[string]int
}

// ErrNotEncrypted is returned by keyring operations on an agent started
// without a gossip key.
var ErrNotEncrypted = errors.New("membership: gossip encryption is not enabled: start every node with encrypt_key or keyring_file")

func (a *Agent) keyOp(op, key string) (KeyReport, error) {
	if !a.serf.EncryptionEnabled() {
		return KeyReport{}, ErrNotEncrypted
	}
	if op != "list" {
		if _, err := DecodeKey(key); err != nil {
			return KeyReport{}, err
		}
	}
	km := a.serf.KeyManager()
	var (
		resp *serf.KeyResponse
		err  error
	)
	// Every operation is idempotent, so a query that timed out before every
	// node answered is simply asked again.
	for attempt := 0; attempt < 3; attempt++ {
		switch op {
		case "install":
			resp, err = km.InstallKey(key)
		case "use":
			resp, err = km.UseKey(key)
		case "remove":
			resp, err = km.RemoveKey(key)
		default:
			resp, err = km.ListKeys()
		}
		if resp == nil || resp.NumErr > 0 || resp.NumResp >= resp.NumNodes {
			break
		}
	}
	var rep KeyReport
	if resp != nil {
		rep = KeyReport{NumNodes: resp.NumNodes, NumResp: resp.NumResp, NumErr: resp.NumErr,
			Messages: resp.Messages, Keys: resp.Keys, PrimaryKeys: resp.PrimaryKeys}
	}
	if err != nil {
		return rep, fmt.Errorf("membership: %s key: %w (%d of %d nodes answered, %d errors: %v)", op, err, rep.NumResp, rep.NumNodes, rep.NumErr, rep.Messages)
	}
	if rep.NumResp < rep.NumNodes {
		return rep, fmt.Errorf("membership: %s key: only %d of %d nodes answered: retry once every node is alive", op, rep.NumResp, rep.NumNodes)
	}
	return rep, nil
}

// InstallKey adds a key to every node's keyring (step 1 of a rotation).
func (a *Agent) InstallKey(key string) (KeyReport, error) { return a.keyOp("install", key) }

// UseKey makes an installed key the one every node encrypts with (step 2).
func (a *Agent) UseKey(key string) (KeyReport, error) { return a.keyOp("use", key) }

// RemoveKey removes a key that is no longer primary anywhere (step 3).
func (a *Agent) RemoveKey(key string) (KeyReport, error) { return a.keyOp("remove", key) }

// ListKeys reports which keys every node has installed and uses.
func (a *Agent) ListKeys() (KeyReport, error) { return a.keyOp("list", "") }
