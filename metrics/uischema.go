package metrics

// UISchema is the schema the node runs, for the dashboard's classification
// table and machine diagrams (/ui/api/schema).
type UISchema struct {
	Fingerprint string      `json:"fingerprint"`
	Types       []UIType    `json:"types"`
	Machines    []UIMachine `json:"machines"`
}

// UIType is one row of the classification table.
type UIType struct {
	Number  uint32 `json:"number"`
	Name    string `json:"name"`
	Class   string `json:"class"`
	Machine string `json:"machine,omitempty"`
	Keys    string `json:"keys,omitempty"`
}

// UIMachine is one machine: its states and transitions, each with the
// entry types that can drive it.
type UIMachine struct {
	Name        string         `json:"name"`
	Key         string         `json:"key"`
	States      []string       `json:"states"`
	Initial     []string       `json:"initial"`
	Terminal    []string       `json:"terminal"`
	Transitions []UITransition `json:"transitions"`
	// Creators drive an instance into each initial state.
	Creators map[string][]string `json:"creators"`
}

// UITransition is one declared transition.
type UITransition struct {
	From string   `json:"from"`
	To   string   `json:"to"`
	By   []string `json:"by"`
}
