package node

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestActivatedConfigPersists(t *testing.T) {
	dir := t.TempDir()
	if c, err := loadActivated(dir); err != nil || c != nil {
		t.Fatalf("fresh dir: %v %v", c, err)
	}
	doc := []byte(`{"version":"4","settings":{"commit_timeout":"3s","max_batch":32,"log_level":"warn"}}`)
	if err := saveActivated(dir, doc); err != nil {
		t.Fatal(err)
	}
	c, err := loadActivated(dir)
	if err != nil || c.Version != "4" || c.Settings["max_batch"] != "32" {
		t.Fatalf("reload: %+v %v", c, err)
	}
	if _, err := os.Stat(filepath.Join(dir, activatedFile+".tmp")); !os.IsNotExist(err) {
		t.Fatal("temporary file left behind")
	}
	if err := os.WriteFile(filepath.Join(dir, activatedFile), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := loadActivated(dir); err == nil {
		t.Fatal("a corrupt activated configuration was accepted")
	}
}

func TestPluginLogLinesKeepTheirLevel(t *testing.T) {
	var buf bytes.Buffer
	w := &slogWriter{l: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))}
	_, _ = w.Write([]byte(`{"@level":"debug","@message":"noise","@timestamp":"x"}` + "\n\n" +
		`{"@level":"error","@message":"handler broke","plugin":"writ-jobs"}` + "\nplain line\n"))
	out := buf.String()
	if strings.Contains(out, "noise") || !strings.Contains(out, `level=ERROR msg="handler broke" plugin=writ-jobs`) || !strings.Contains(out, "plain line") {
		t.Fatalf("plugin log forwarding:\n%s", out)
	}
	if strings.Count(out, "\n") != 2 {
		t.Fatalf("empty lines forwarded:\n%s", out)
	}
}
