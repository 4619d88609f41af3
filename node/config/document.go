package config

import (
	"bytes"
	"encoding/json"
	"fmt"

	toml "github.com/pelletier/go-toml/v2"
	yaml "go.yaml.in/yaml/v3"
)

// DocumentJSON converts a configuration document of any config-class type
// (YAML, TOML or JSON; format "" guesses) to JSON, keeping its field names
// as written. The schema's catalog validates the result; this only checks
// the syntax and that the document is one object.
func DocumentJSON(doc []byte, format string) ([]byte, error) {
	if format == "" {
		switch {
		case bytes.HasPrefix(bytes.TrimSpace(doc), []byte("{")):
			format = "json"
		case looksTOML(doc):
			format = "toml"
		default:
			format = "yaml"
		}
	}
	var v map[string]any
	var err error
	switch format {
	case "json":
		err = json.Unmarshal(doc, &v)
	case "yaml":
		err = yaml.Unmarshal(doc, &v)
	case "toml":
		err = toml.Unmarshal(doc, &v)
	default:
		return nil, &Error{Key: "document", Msg: fmt.Sprintf("unsupported format %q", format), Fix: "use a .yaml, .yml, .toml or .json file"}
	}
	if err != nil {
		return nil, &Error{Key: "document", Msg: "cannot parse " + format + ": " + oneLine(err.Error()), Fix: "fix the syntax"}
	}
	if v == nil {
		return nil, &Error{Key: "document", Msg: "is empty", Fix: "write the configuration as one object with its fields"}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, &Error{Key: "document", Msg: oneLine(err.Error()), Fix: "use only strings, numbers, booleans, lists and objects"}
	}
	return b, nil
}

// CompareVersions orders two configuration versions of up to three
// dot-separated numbers ("2" < "2.1" < "10"); a missing part is 0. ok is
// false when either is not such a version.
func CompareVersions(a, b string) (cmp int, ok bool) {
	if !versionRe.MatchString(a) || !versionRe.MatchString(b) {
		return 0, false
	}
	pa, pb := versionParts(a), versionParts(b)
	for i := range pa {
		switch {
		case pa[i] < pb[i]:
			return -1, true
		case pa[i] > pb[i]:
			return 1, true
		}
	}
	return 0, true
}

func versionParts(v string) [3]uint64 {
	var out [3]uint64
	i := 0
	for _, c := range v {
		if c == '.' {
			i++
			continue
		}
		out[i] = out[i]*10 + uint64(c-'0')
	}
	return out
}
