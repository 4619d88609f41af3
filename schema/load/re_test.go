package load

import (
	"regexp"
	"sync"
)

var reCache sync.Map

func regexpCache(p string) *regexp.Regexp {
	if r, ok := reCache.Load(p); ok {
		return r.(*regexp.Regexp)
	}
	r := regexp.MustCompile(p)
	reCache.Store(p, r)
	return r
}
