package conformance

// The suite's own tests run inside the writ module: when no writd binary is
// installed they may build one from this source.
func init() { buildWritdFromSource = true }
