package node

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// privateTree makes the data directory private to the node's user:
// directories 0700, files 0600 (the raft log, the store, the gossip
// keyring and snapshot hold cluster data and keys). Entries created by an
// older version or by a library with a wider mode are narrowed in place;
// it returns how many were changed.
func privateTree(dir string) (int, error) {
	changed := 0
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type()&fs.ModeSymlink != 0 {
			return nil // never follow a link out of the data directory
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		m := fi.Mode().Perm()
		if m&0o077 == 0 {
			return nil
		}
		want := m &^ 0o077
		if d.IsDir() {
			want = 0o700
		} else if !fi.Mode().IsRegular() {
			return nil // sockets and other special files: leave alone
		}
		if err := os.Chmod(path, want); err != nil {
			return err
		}
		changed++
		return nil
	})
	if err != nil {
		return changed, fmt.Errorf("node: data_dir permissions: %w", err)
	}
	return changed, nil
}
