//go:build race

package sim

// raceEnabled: this test binary is built with the race detector, so
// TestSim runs a few seeds here and the full count in a build without it
// (raceSeeds, runSeedsWithoutRace).
const raceEnabled = true
