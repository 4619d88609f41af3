// Command writ-leases is the lease service example's handler plugin. writd
// launches it as a go-plugin process; it is not meant to be run by hand.
package main

import (
	"github.com/writ-dev/writ/examples/leases/handler"
	"github.com/writ-dev/writ/plugins/sdk"
)

func main() {
	sdk.Serve(handler.Plugin())
}
