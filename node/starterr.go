package node

import (
	"regexp"
	"strings"
)

var (
	// multiErrHead is a multi-error's header and first bullet ("1 error
	// occurred:\n\t* "), as serf's join failures carry; multiErrItem is
	// each further bullet.
	multiErrHead = regexp.MustCompile(`\b\d+ errors? occurred:\s*\*\s*`)
	multiErrItem = regexp.MustCompile(`\s*\n\s*\*\s*`)
)

// oneLine flattens a component's error into one line for a StartError: a
// multi-error's items are joined with "; ", and the component prefix is
// added only when the message does not already start with it, so the line
// reads "writd: membership: …" once, not "membership: membership: …".
func oneLine(component string, err error) string {
	msg := multiErrHead.ReplaceAllString(err.Error(), "")
	msg = multiErrItem.ReplaceAllString(msg, "; ")
	msg = strings.ReplaceAll(strings.Join(strings.Fields(msg), " "), " : ", ": ")
	if strings.HasPrefix(msg, component+": ") {
		return msg
	}
	return component + ": " + msg
}
