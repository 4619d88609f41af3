package config

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// ParsePlugin parses the flag and environment form PATH[=SHA256]. The
// checksum, when given, follows the last '=' and is 64 hexadecimal digits.
func ParsePlugin(s string) (Plugin, error) {
	s = strings.TrimSpace(s)
	p := Plugin{Path: s}
	if i := strings.LastIndexByte(s, '='); i >= 0 {
		p.Path, p.SHA256 = s[:i], strings.ToLower(s[i+1:])
		if !isSHA256Hex(p.SHA256) {
			return Plugin{}, fmt.Errorf("checksum %q after '=' is not 64 hexadecimal digits", s[i+1:])
		}
	}
	if p.Path == "" {
		return Plugin{}, fmt.Errorf("%q names no plugin binary", s)
	}
	return p, nil
}

// PinPlugin returns the plugin binary at path pinned to the SHA-256 of
// its content now, for a tool that starts writd with a binary it has
// verified or built itself: Plugin.String is then the --plugin value.
func PinPlugin(path string) (Plugin, error) {
	f, err := os.Open(path)
	if err != nil {
		return Plugin{}, fmt.Errorf("config: plugin %s: %w", path, err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return Plugin{}, fmt.Errorf("config: plugin %s: %w", path, err)
	}
	return Plugin{Path: path, SHA256: hex.EncodeToString(h.Sum(nil))}, nil
}

// String renders the plugin in the PATH[=SHA256] form.
func (p Plugin) String() string {
	if p.SHA256 == "" {
		return p.Path
	}
	return p.Path + "=" + p.SHA256
}

// plugins reads the handler plugin list: strings PATH[=SHA256] (flags,
// environment, or a file's list of strings) or maps {path, sha256} (file).
func (s source) plugins(key string) ([]Plugin, error) {
	var raw []any
	switch x := s.v.Get(key).(type) {
	case nil:
	case []any:
		raw = x
	case []string:
		for _, e := range x {
			raw = append(raw, e)
		}
	case []map[string]any:
		for _, e := range x {
			raw = append(raw, e)
		}
	case []Plugin:
		for _, e := range x {
			raw = append(raw, e)
		}
	case string:
		for _, e := range splitList(x) {
			raw = append(raw, e)
		}
	default:
		return nil, s.fail(key, fmt.Sprintf("%v is not a list of plugins", x), "write plugins: [{path: BIN, sha256: HEX}]")
	}
	var out []Plugin
	seen := map[string]int{}
	for i, e := range raw {
		var p Plugin
		switch x := e.(type) {
		case Plugin:
			p = x
		case string:
			var err error
			if p, err = ParsePlugin(x); err != nil {
				return nil, s.fail(key, err.Error(), "give each plugin as PATH or PATH=SHA256 (the output of `sha256sum PATH`)")
			}
		case map[string]any:
			for k := range x {
				if k != "path" && k != "sha256" {
					return nil, s.fail(key, fmt.Sprintf("entry %d has unknown field %q", i, k), "give each plugin only path and sha256")
				}
			}
			p.Path = strings.TrimSpace(fmt.Sprint(x["path"]))
			if x["path"] == nil || p.Path == "" {
				return nil, s.fail(key, fmt.Sprintf("entry %d has no path", i), "set path to the plugin binary")
			}
			if v, ok := x["sha256"]; ok && v != nil {
				p.SHA256 = strings.ToLower(strings.TrimSpace(fmt.Sprint(v)))
				if !isSHA256Hex(p.SHA256) {
					return nil, s.fail(key, fmt.Sprintf("entry %d (%s): sha256 %q is not 64 hexadecimal digits", i, p.Path, p.SHA256), "use the output of `sha256sum "+p.Path+"`")
				}
			}
		default:
			return nil, s.fail(key, fmt.Sprintf("entry %d (%v) is neither PATH[=SHA256] nor {path, sha256}", i, e), "write plugins: [{path: BIN, sha256: HEX}]")
		}
		if err := checkExec(p.Path); err != nil {
			return nil, s.fail(key, err.Error(), "point each plugin at an executable handler binary built with plugins/sdk")
		}
		abs, err := filepath.Abs(p.Path)
		if err != nil {
			return nil, s.fail(key, err.Error(), "")
		}
		p.Path = abs
		if j, dup := seen[abs]; dup {
			return nil, s.fail(key, fmt.Sprintf("%s is listed twice (entries %d and %d)", abs, j, i), "list each plugin binary once")
		}
		seen[abs] = i
		out = append(out, p)
	}
	return out, nil
}
