package schema

import "embed"

// MetaFile is the name of the meta-schema file inside FS.
const MetaFile = "writ.cue"

// FS holds the meta-schema source.
//
//go:embed writ.cue
var FS embed.FS

// Meta returns the meta-schema source.
func Meta() []byte {
	b, err := FS.ReadFile(MetaFile)
	if err != nil {
		// The file is embedded at build time; failing here is a build defect.
		panic("schema: embedded meta-schema missing: " + err.Error())
	}
	return b
}
