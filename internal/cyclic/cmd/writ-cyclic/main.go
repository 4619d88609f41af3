// Command writ-cyclic is the handler plugin of the cyclic test domain; the
// writ host launches it.
package main

import (
	"github.com/writ-dev/writ/internal/cyclic/handler"
	"github.com/writ-dev/writ/plugins/sdk"
)

func main() {
	sdk.Serve(handler.Plugin())
}
