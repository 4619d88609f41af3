package membership

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/memberlist"
)

// FuzzKeyringFile feeds arbitrary keyring files to the loader: it must
// either return a clear error or a keyring whose keys are all valid.
func FuzzKeyringFile(f *testing.F) {
	f.Add([]byte(`["3wVf3rSAVxd8QZ2Mj0+sDuO3L7/LO+mq0A1d+KfTgj0="]`))
	f.Add([]byte(`[]`))
	f.Add([]byte(`{"k":1}`))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(dir, "keyring.json")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		cfg := Config{KeyringFile: path}
		kr, err := loadKeyring(&cfg)
		if err != nil {
			if kr != nil {
				t.Fatal("keyring returned with an error")
			}
			return
		}
		if kr == nil || len(kr.GetKeys()) == 0 {
			t.Fatal("no error and no keys")
		}
		for _, k := range kr.GetKeys() {
			if memberlist.ValidateKey(k) != nil {
				t.Fatalf("invalid key %x accepted", k)
			}
		}
	})
}
