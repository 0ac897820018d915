//go:build race

package temporalproc

// raceEnabled: this binary was built with -race, and Build builds the
// worker with it too, so the server shares the packages the test build
// compiled (one compile of the Temporal server's graph, not two).
const raceEnabled = true
