package gen

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// IsGenerated reports whether src starts with writ's generated-code header.
func IsGenerated(src []byte) bool {
	return bytes.HasPrefix(src, []byte(Header+"\n"))
}

// stale lists the *_gen.go files in dir that writ generated but that are not
// in files.
func stale(dir string, files map[string][]byte) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("gen: %w", err)
	}
	var out []string
	for _, e := range ents {
		n := e.Name()
		if e.IsDir() || !strings.HasSuffix(n, "_gen.go") {
			continue
		}
		if _, ok := files[n]; ok {
			continue
		}
		f, err := os.Open(filepath.Join(dir, n))
		if err != nil {
			return nil, fmt.Errorf("gen: %w", err)
		}
		line, _ := bufio.NewReader(f).ReadString('\n')
		f.Close()
		if strings.TrimRight(line, "\n") == Header {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out, nil
}

// Write stores files in dir all-or-nothing: every file is first written and
// synced to a temporary name in dir; only when all of them succeeded are they
// renamed into place, after which generated files that are no longer
// produced are removed. On any error before the renames, dir is unchanged.
func Write(dir string, files map[string][]byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("gen: %w", err)
	}
	names := sortedNames(files)
	// Refuse before writing anything if a target cannot be replaced.
	for _, n := range names {
		if fi, err := os.Lstat(filepath.Join(dir, n)); err == nil && !fi.Mode().IsRegular() {
			return fmt.Errorf("gen: %s exists and is not a regular file (fix: remove it)", filepath.Join(dir, n))
		}
	}
	tmps := map[string]string{}
	cleanup := func() {
		for _, t := range tmps {
			os.Remove(t)
		}
	}
	for _, n := range names {
		f, err := os.CreateTemp(dir, "."+n+".tmp-*")
		if err != nil {
			cleanup()
			return fmt.Errorf("gen: %w", err)
		}
		tmps[n] = f.Name()
		_, werr := f.Write(files[n])
		serr := f.Sync()
		cerr := f.Close()
		if err := errors.Join(werr, serr, cerr); err != nil {
			cleanup()
			return fmt.Errorf("gen: writing %s: %w", n, err)
		}
		if err := os.Chmod(f.Name(), 0o644); err != nil {
			cleanup()
			return fmt.Errorf("gen: %w", err)
		}
	}
	old, err := stale(dir, files)
	if err != nil {
		cleanup()
		return err
	}
	for _, n := range names {
		if err := os.Rename(tmps[n], filepath.Join(dir, n)); err != nil {
			cleanup()
			return fmt.Errorf("gen: %w", err)
		}
		delete(tmps, n)
	}
	for _, n := range old {
		if err := os.Remove(filepath.Join(dir, n)); err != nil {
			return fmt.Errorf("gen: removing stale %s: %w", n, err)
		}
	}
	return nil
}

func sortedNames(files map[string][]byte) []string {
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Check compares files with what is in dir and returns a human-readable
// diff; an empty string means dir is up to date (including: no stale
// generated files).
func Check(dir string, files map[string][]byte) (string, error) {
	var out strings.Builder
	for _, n := range sortedNames(files) {
		cur, err := os.ReadFile(filepath.Join(dir, n))
		if errors.Is(err, os.ErrNotExist) {
			fmt.Fprintf(&out, "--- %s (missing)\n+++ %s (generated)\n", filepath.Join(dir, n), n)
			continue
		}
		if err != nil {
			return "", fmt.Errorf("gen: %w", err)
		}
		if !bytes.Equal(cur, files[n]) {
			out.WriteString(Diff(filepath.Join(dir, n), "generated "+n, cur, files[n]))
		}
	}
	old, err := stale(dir, files)
	if err != nil {
		return "", err
	}
	for _, n := range old {
		fmt.Fprintf(&out, "--- %s (stale: no longer generated)\n", filepath.Join(dir, n))
	}
	return out.String(), nil
}

// Diff returns a line diff of a and b (LCS-based; unchanged lines are shown
// as up to 2 lines of context around each change).
func Diff(nameA, nameB string, a, b []byte) string {
	la := strings.SplitAfter(string(a), "\n")
	lb := strings.SplitAfter(string(b), "\n")
	n, m := len(la), len(lb)
	// Trim the common prefix and suffix to keep the table small.
	pre := 0
	for pre < n && pre < m && la[pre] == lb[pre] {
		pre++
	}
	suf := 0
	for suf < n-pre && suf < m-pre && la[n-1-suf] == lb[m-1-suf] {
		suf++
	}
	xa, xb := la[pre:n-suf], lb[pre:m-suf]
	if len(xa)*len(xb) > 25_000_000 {
		return fmt.Sprintf("--- %s\n+++ %s\n@@ files differ from line %d (too large to diff) @@\n", nameA, nameB, pre+1)
	}
	lcs := make([][]int, len(xa)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(xb)+1)
	}
	for i := len(xa) - 1; i >= 0; i-- {
		for j := len(xb) - 1; j >= 0; j-- {
			if xa[i] == xb[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var out strings.Builder
	fmt.Fprintf(&out, "--- %s\n+++ %s\n@@ -%d +%d @@\n", nameA, nameB, pre+1, pre+1)
	for k := max(0, pre-2); k < pre; k++ {
		out.WriteString(" " + withNL(la[k]))
	}
	i, j := 0, 0
	for i < len(xa) || j < len(xb) {
		switch {
		case i < len(xa) && j < len(xb) && xa[i] == xb[j]:
			out.WriteString(" " + withNL(xa[i]))
			i++
			j++
		case j < len(xb) && (i == len(xa) || lcs[i][j+1] >= lcs[i+1][j]):
			out.WriteString("+" + withNL(xb[j]))
			j++
		default:
			out.WriteString("-" + withNL(xa[i]))
			i++
		}
	}
	for k := n - suf; k < n && k < n-suf+2; k++ {
		out.WriteString(" " + withNL(la[k]))
	}
	return out.String()
}

func withNL(s string) string {
	if strings.HasSuffix(s, "\n") {
		return s
	}
	return s + "\n"
}
