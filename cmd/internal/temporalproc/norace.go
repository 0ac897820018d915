//go:build !race

package temporalproc

// raceEnabled: this binary was built without -race.
const raceEnabled = false
