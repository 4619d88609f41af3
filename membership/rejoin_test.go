package membership

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestSnapshotPeers reads the members serf's snapshot will rejoin, in
// serf's own snapshot format: the alive ones other than this node, none
// after a leave (serf does not rejoin then), none without a snapshot.
func TestSnapshotPeers(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		name, body string
		want       []string
	}{
		{"restarted", "alive: n1 127.0.47.1:7303\nalive: n2 127.0.47.2:7303\nclock: 1\nalive: n3 127.0.47.3:7303\nnot-alive: n2\nclock: 2\n", []string{"n3"}},
		{"left", "alive: n2 127.0.47.2:7303\nalive: n3 127.0.47.3:7303\nleave\n", nil},
		{"rejoined after leave", "alive: n2 127.0.47.2:7303\nleave\nalive: n3 127.0.47.3:7303\n", []string{"n3"}},
		{"only itself", "alive: n1 127.0.47.1:7303\n", nil},
	} {
		got := snapshotPeers(write(tc.name, tc.body), "n1")
		if !slices.Equal(got, tc.want) && (len(got) != 0 || len(tc.want) != 0) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	if got := snapshotPeers(filepath.Join(dir, "none"), "n1"); len(got) != 0 {
		t.Errorf("no snapshot: %v", got)
	}
	if got := snapshotPeers("", "n1"); len(got) != 0 {
		t.Errorf("no snapshot path: %v", got)
	}
}
