//go:build !race

package sim

// raceEnabled: this test binary is built without the race detector, so
// TestSim runs every seed in this process.
const raceEnabled = false
