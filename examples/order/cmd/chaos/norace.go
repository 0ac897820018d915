//go:build !race

package main

// raceEnabled: this binary was built without -race (see race.go).
const raceEnabled = false
