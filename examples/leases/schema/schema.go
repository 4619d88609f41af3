package schema

import "embed"

// FS holds the schema's .cue files.
//
//go:embed *.cue
var FS embed.FS
