package config

import (
	"strings"
	"testing"
)

// TestDocumentJSONEveryFormat: a schema config document reads the same
// from YAML, TOML and JSON, keeps its field names' case, and bad syntax is
// one line naming the format.
func TestDocumentJSONEveryFormat(t *testing.T) {
	want := `{"settings":{"maxTTL":1000,"name":"a"},"version":"2"}`
	for format, doc := range map[string]string{
		"yaml": "version: \"2\"\nsettings:\n  maxTTL: 1000\n  name: a\n",
		"toml": "version = \"2\"\n[settings]\nmaxTTL = 1000\nname = \"a\"\n",
		"json": `{"version":"2","settings":{"maxTTL":1000,"name":"a"}}`,
	} {
		for _, f := range []string{format, ""} {
			got, err := DocumentJSON([]byte(doc), f)
			if err != nil || string(got) != want {
				t.Errorf("%s (format %q): %s %v", format, f, got, err)
			}
		}
	}
	for _, c := range []struct{ doc, format, want string }{
		{"version: [\n", "yaml", "cannot parse yaml"},
		{"{", "json", "cannot parse json"},
		{"", "yaml", "is empty"},
		{"x", "ini", "unsupported format"},
	} {
		_, err := DocumentJSON([]byte(c.doc), c.format)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: %v, want one line with %q", c.doc, err, c.want)
		}
	}
}
