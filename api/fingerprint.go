package api

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"strings"
)

// KeyFingerprint is how a gossip key is shown anywhere outside the node:
// the hex of the first 8 bytes of the SHA-256 of the decoded key (16 hex
// digits). It identifies a key without revealing it; compare with
// `base64 -d KEYFILE | sha256sum | cut -c1-16`. A key that is not valid
// base64 is hashed as given.
func KeyFingerprint(key string) string {
	k := strings.TrimSpace(key)
	b, err := base64.StdEncoding.DecodeString(k)
	if err != nil {
		b = []byte(k)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}
