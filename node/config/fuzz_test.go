package config

import (
	"encoding/json"
	"strings"
	"testing"
)

// FuzzParsePlugin: any flag value either parses into a plugin whose
// String form parses back to it, or is one error line.
func FuzzParsePlugin(f *testing.F) {
	for _, s := range []string{"/bin/true", "/bin/true=" + strings.Repeat("a", 64), "=", "a=b=c", " /x ", "/x=" + strings.Repeat("G", 64)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParsePlugin(s)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("multi-line error %q", err)
			}
			return
		}
		q, err := ParsePlugin(p.String())
		if err != nil || q != p {
			t.Fatalf("%q → %+v → %q → %+v, %v", s, p, p.String(), q, err)
		}
	})
}

// FuzzDocumentJSON: any document either converts to one JSON object or is
// one error line; never a panic.
func FuzzDocumentJSON(f *testing.F) {
	for _, s := range []string{"version: \"2\"\nsettings:\n  a: 1\n", "version = \"2\"\n", `{"a":[1,{"b":null}]}`, "- 1\n- 2\n", "a: !!binary aGk=\n"} {
		f.Add([]byte(s), "")
		f.Add([]byte(s), "yaml")
		f.Add([]byte(s), "toml")
		f.Add([]byte(s), "json")
	}
	f.Fuzz(func(t *testing.T, doc []byte, format string) {
		b, err := DocumentJSON(doc, format)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("multi-line error %q", err)
			}
			return
		}
		var m map[string]any
		if json.Unmarshal(b, &m) != nil || m == nil {
			t.Fatalf("not one JSON object: %s", b)
		}
	})
}
