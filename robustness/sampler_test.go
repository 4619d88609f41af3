package robustness

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/pprof"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSamplerReadsRSSAndGoroutines reads this process's RSS from /proc and
// its goroutine count from a real pprof handler, as the sampler does from
// writd's metrics listener.
func TestSamplerReadsRSSAndGoroutines(t *testing.T) {
	if rss := rssOf(os.Getpid()); rss <= 0 {
		t.Fatalf("RSS of this process: %d", rss)
	}
	if rss := rssOf(1 << 30); rss != -1 {
		t.Fatalf("RSS of no process: %d", rss)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	if n := goroutinesOf(context.Background(), addr); n < 2 {
		t.Fatalf("goroutines: %d", n)
	}
	srv.Close()
	if n := goroutinesOf(context.Background(), addr); n != -1 {
		t.Fatalf("goroutines of a closed listener: %d", n)
	}
}

// TestGrowth_FakeUsage flags a process whose goroutines or RSS more than
// doubled between the quiet samples, and nothing else.
func TestGrowth_FakeUsage(t *testing.T) {
	a := &Usage{Pid: 7, RSS: 100 << 20, Goroutines: 80}
	for _, c := range []struct {
		b    *Usage
		want string
	}{
		{&Usage{Pid: 7, RSS: 120 << 20, Goroutines: 95}, ""},
		{&Usage{Pid: 7, RSS: 120 << 20, Goroutines: 400}, "goroutines 80 → 400"},
		{&Usage{Pid: 7, RSS: 300 << 20, Goroutines: 80}, "RSS 100 → 300 MiB"},
		{&Usage{Pid: 8, RSS: 300 << 20, Goroutines: 400}, ""}, // another process
		{nil, ""},
	} {
		if got := growth(a, c.b); got != c.want {
			t.Errorf("growth(%+v, %+v) = %q, want %q", a, c.b, got, c.want)
		}
	}
}

// TestSaveGoroutinesWritesTheGroupedProfile saves a real pprof handler's
// goroutine profile, as mark does for a node whose growth is flagged, and
// writes nothing for a listener that is gone.
func TestSaveGoroutinesWritesTheGroupedProfile(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	path := filepath.Join(t.TempDir(), "goroutines-n1.txt")
	saveGoroutines(context.Background(), addr, 1, path)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(b), "goroutine profile: total ") || !strings.Contains(string(b), "TestSaveGoroutinesWritesTheGroupedProfile") {
		t.Fatalf("saved profile does not name this test's goroutine:\n%.400s", b)
	}
	// debug=2 (a converge failure's dump): one stack per goroutine, with
	// its state
	all := filepath.Join(t.TempDir(), "stuck-goroutines-n1.txt")
	saveGoroutines(context.Background(), addr, 2, all)
	if b, err = os.ReadFile(all); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(b), "goroutine ") || !strings.Contains(string(b), "TestSaveGoroutinesWritesTheGroupedProfile") {
		t.Fatalf("saved debug=2 profile does not list this test's goroutine:\n%.400s", b)
	}
	srv.Close()
	gone := filepath.Join(t.TempDir(), "goroutines-n2.txt")
	saveGoroutines(context.Background(), addr, 1, gone)
	if _, err := os.Stat(gone); !os.IsNotExist(err) {
		t.Fatalf("a profile was written for a closed listener: %v", err)
	}
}
