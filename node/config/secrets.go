package config

import (
	"encoding/base64"
	"fmt"
	"io"
	"os"
	"strings"
)

// maxKeyFile bounds how much of gossip.key_file is read: a base64 key is
// at most 44 characters, the rest is room for whitespace.
const maxKeyFile = 4096

// gossipKey reads gossip.key or gossip.key_file into n.GossipKey and checks
// where the secret lives: a key file, or a config file holding gossip.key,
// that group or others can read is refused; a key given as a flag (visible
// to every user in ps) and a config file others can read get a warning.
func (s source) gossipKey(n *Node, file string) error {
	key, err := s.str("gossip.key")
	if err != nil {
		return err
	}
	kf, err := s.str("gossip.key_file")
	if err != nil {
		return err
	}
	if key != "" && kf != "" {
		return s.fail("gossip.key_file", "set together with gossip.key", "set only gossip.key_file")
	}
	if kf != "" {
		if key, err = readKeyFile(kf); err != nil {
			return s.fail("gossip.key_file", err.Error(), "write the key with `(umask 077; head -c 32 /dev/urandom | base64 > FILE)` or chmod 600 it")
		}
	}
	if key == "" {
		return nil
	}
	b, err := base64.StdEncoding.DecodeString(key)
	if err != nil || (len(b) != 16 && len(b) != 24 && len(b) != 32) {
		k := "gossip.key"
		if kf != "" {
			k = "gossip.key_file"
		}
		return s.fail(k, "not a base64 key of 16, 24 or 32 bytes", "generate one with `head -c 32 /dev/urandom | base64`")
	}
	n.GossipKey = b
	from := s.where("gossip.key")
	switch {
	case strings.HasPrefix(from, "flag "):
		n.Warnings = append(n.Warnings, "config: gossip.key ("+from+") is visible to every user of this host in the process arguments: put the key in a 0600 file and set gossip.key_file instead")
	case strings.HasPrefix(from, "file ") && file != "":
		if m, ok := othersCanRead(file); ok {
			return &Error{Key: "gossip.key", Source: from, Msg: fmt.Sprintf("the config file holds the gossip key and is readable by group or others (mode %v)", m),
				Fix: "chmod 600 " + file + ", or move the key to a 0600 file named by gossip.key_file"}
		}
	}
	return nil
}

// readKeyFile returns the trimmed content of a gossip key file, which must
// be a regular file only its owner can read.
func readKeyFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("cannot read %s: %v", path, unwrapPath(err))
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("cannot stat %s: %v", path, unwrapPath(err))
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("%s is not a regular file (mode %v)", path, fi.Mode())
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("%s is readable or writable by group or others (mode %v): the key must be private to this user", path, fi.Mode().Perm())
	}
	b, err := io.ReadAll(io.LimitReader(f, maxKeyFile+1))
	if err != nil {
		return "", fmt.Errorf("cannot read %s: %v", path, err)
	}
	if len(b) > maxKeyFile {
		return "", fmt.Errorf("%s is larger than %d bytes: it must hold one base64 key", path, maxKeyFile)
	}
	return strings.TrimSpace(string(b)), nil
}

// othersCanRead reports the mode of file when group or others can read it.
func othersCanRead(file string) (os.FileMode, bool) {
	fi, err := os.Stat(file)
	if err != nil {
		return 0, false
	}
	m := fi.Mode().Perm()
	return m, m&0o044 != 0
}

// configFileWarning is the warning for a config file that group or others
// can read (it holds no secret: gossipKey refuses one that does).
func configFileWarning(file string) string {
	if file == "" {
		return ""
	}
	if m, ok := othersCanRead(file); ok {
		return fmt.Sprintf("config: %s is readable by group or others (mode %v): it holds no secret, but chmod 600 it before adding one", file, m)
	}
	return ""
}
