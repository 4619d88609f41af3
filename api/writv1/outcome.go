package writv1

import "google.golang.org/grpc/status"

// OutcomeFromError extracts the writ outcome detail a writ.v1 server
// attaches to the gRPC error of any call (hand-written; the rest of the
// package is generated).
func OutcomeFromError(err error) (*OutcomeDetail, bool) {
	st, ok := status.FromError(err)
	if !ok {
		return nil, false
	}
	for _, d := range st.Details() {
		if od, ok := d.(*OutcomeDetail); ok {
			return od, true
		}
	}
	return nil, false
}
