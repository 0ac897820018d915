//go:build race

package main

// raceEnabled: this binary was built with -race, and builds the worker
// with it too (a CI run with -race shares the test build's cache, and
// checks the workers for data races under faults).
const raceEnabled = true
