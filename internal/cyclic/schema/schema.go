// Package schema embeds the cyclic test domain's schema: one machine whose
// states go back and forth, with order epochs. The generated Go for it
// lives in internal/cyclic/cyclicgen, its handler in internal/cyclic/handler.
package schema

import "embed"

// FS holds the schema's .cue files.
//
//go:embed *.cue
var FS embed.FS
