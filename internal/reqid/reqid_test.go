package reqid

import (
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

var form = regexp.MustCompile(`^r-[0-9a-f]{32}$`)

// TestNew: IDs from many goroutines at once are all distinct and of the
// documented form, carry the millisecond they were made at, and IDs made
// in different milliseconds sort in the order they were made.
func TestNew(t *testing.T) {
	const workers, each = 8, 20000
	start := time.Now().Truncate(time.Millisecond)
	ids := make([][]string, workers)
	var wg sync.WaitGroup
	for w := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				ids[w] = append(ids[w], New("r-"))
			}
		}()
	}
	wg.Wait()
	end := time.Now()
	seen := make(map[string]bool, workers*each)
	for _, l := range ids {
		for i, id := range l {
			if !form.MatchString(id) {
				t.Fatalf("%q is not r- and 32 hex digits", id)
			}
			if seen[id] {
				t.Fatalf("%q made twice", id)
			}
			seen[id] = true
			at, ok := Time(strings.TrimPrefix(id, "r-"))
			if !ok || at.Before(start) || at.After(end) {
				t.Fatalf("%q says %v, made between %v and %v", id, at, start, end)
			}
			// one goroutine's IDs never go back in time
			if i > 0 {
				prev, _ := Time(strings.TrimPrefix(l[i-1], "r-"))
				if at.Before(prev) {
					t.Fatalf("%q (at %v) made after %q (at %v)", id, at, l[i-1], prev)
				}
			}
		}
	}
	var seq []string
	for range 5 {
		seq = append(seq, New("r-"))
		time.Sleep(2 * time.Millisecond)
	}
	if !sort.StringsAreSorted(seq) {
		t.Fatalf("IDs made milliseconds apart do not sort in order: %v", seq)
	}
	for _, bad := range []string{"", "xyz", strings.Repeat("g", 32), strings.Repeat("0", 31)} {
		if _, ok := Time(bad); ok {
			t.Errorf("Time(%q) accepted", bad)
		}
	}
}
