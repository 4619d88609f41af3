package config

import "fmt"

// pinPlugins is the no-trust-on-first-use rule for handler plugins. Every
// node but the zero-configuration dev node runs only plugins whose
// SHA-256 the configuration pins; writd would otherwise trust whatever
// binary it finds at the path on first start. why, from secureByDefault,
// says what makes the node network-facing, if anything. insecure: true
// allows unpinned plugins with a warning. It sets RequirePinnedPlugins so
// that a plugin found without configuration (writ-jobs next to writd) is
// refused too.
func (s source) pinPlugins(n *Node, why string, insecure bool) error {
	if n.Dev {
		return nil
	}
	if why == "" {
		why = "this node is configured (it is not the zero-configuration dev node)"
	}
	var unpinned []string
	for _, p := range n.Plugins {
		if p.SHA256 == "" {
			unpinned = append(unpinned, p.Path)
		}
	}
	if insecure {
		if len(unpinned) > 0 {
			n.Warnings = append(n.Warnings, fmt.Sprintf("config: insecure: plugins %v are not pinned by sha256: each is trusted as found at first start (docs/security.md)", unpinned))
		}
		return nil
	}
	n.RequirePinnedPlugins = true
	if len(unpinned) == 0 {
		return nil
	}
	p := unpinned[0]
	return s.fail("plugins", fmt.Sprintf("%s has no sha256, and %s: writd does not trust a plugin binary on first use", p, why),
		fmt.Sprintf("pin it with HEX from `sha256sum %s`: plugins: [{path: %s, sha256: HEX}] or %s=HEX, or set insecure: true", p, p, p))
}
