// Command leasessplit is the leases example's handler plugin serving only
// the entry types whose name starts with the prefix set at link time
// (-ldflags "-X main.prefix=lease."), so that the suite's tests can run a
// schema whose types are split over two plugin binaries.
package main

import (
	"strings"

	"github.com/writ-dev/writ/examples/leases/handler"
	"github.com/writ-dev/writ/plugins/sdk"
)

// prefix selects the served types; set with -ldflags -X.
var prefix string

func main() {
	p := handler.Plugin()
	p.Name += "-" + strings.TrimSuffix(prefix, ".")
	for t := range p.Handlers {
		if !strings.HasPrefix(t, prefix) {
			delete(p.Handlers, t)
		}
	}
	sdk.Serve(p)
}
