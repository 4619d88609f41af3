package host

import "strings"

// The plugin environment is an allow-list: a plugin never inherits the
// node's environment, which may hold secrets (WRIT_GOSSIP_KEY, tokens,
// cloud credentials). It gets the variables a process needs to run (PATH,
// HOME, locale, time zone, temporary directory), the Go runtime's tuning
// knobs, and every variable starting with WRIT_PLUGIN_ (the place for
// plugin settings). go-plugin then adds its own handshake variables.

// envAllowed are the variables passed through by exact name.
var envAllowed = map[string]bool{
	"PATH": true, "HOME": true, "USER": true, "LOGNAME": true, "SHELL": true,
	"TMPDIR": true, "TZ": true, "LANG": true, "LANGUAGE": true,
	"GOMAXPROCS": true, "GOGC": true, "GOMEMLIMIT": true, "GODEBUG": true,
	"GOTRACEBACK": true, "GORACE": true, "GOCOVERDIR": true,
}

// envAllowedPrefixes are the variable-name prefixes passed through.
var envAllowedPrefixes = []string{"LC_", "WRIT_PLUGIN_"}

// pluginEnv filters environ (KEY=VALUE entries) down to the allow-list.
func pluginEnv(environ []string) []string {
	out := make([]string, 0, 16)
	for _, kv := range environ {
		name, _, ok := strings.Cut(kv, "=")
		if !ok || name == "" {
			continue
		}
		if envAllowed[name] || hasAnyPrefix(name, envAllowedPrefixes) {
			out = append(out, kv)
		}
	}
	return out
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}
