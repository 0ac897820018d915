// Package depcheck holds the test that keeps the binaries' module
// standing on the library alone: no package of it, nor any of its tests,
// imports an example (the order system is a module of its own,
// examples/order, that builds on this one).
package depcheck
