package gen

import (
	"strings"
	"unicode"
)

var initialisms = map[string]string{
	"id": "ID", "ids": "IDs", "cpu": "CPU", "api": "API", "url": "URL", "uri": "URI",
	"http": "HTTP", "json": "JSON", "ip": "IP", "tls": "TLS", "ttl": "TTL", "uuid": "UUID",
}

// goName turns snake_case or dotted names into an exported Go identifier:
// "job_id" → "JobID", "job.state_report" → "JobStateReport".
func goName(s string) string {
	var b strings.Builder
	for _, w := range strings.FieldsFunc(s, func(r rune) bool { return r == '_' || r == '.' || r == '-' }) {
		if up, ok := initialisms[strings.ToLower(w)]; ok {
			b.WriteString(up)
			continue
		}
		rs := []rune(strings.ToLower(w))
		rs[0] = unicode.ToUpper(rs[0])
		b.WriteString(string(rs))
	}
	out := b.String()
	if out == "" || !unicode.IsLetter([]rune(out)[0]) {
		out = "X" + out
	}
	return out
}
