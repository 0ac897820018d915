// Package buildlist holds no code: its test builds a throw-away module that
// imports the library's packages, as a user's service would, and checks
// what that module's build list holds. The embedded Temporal server, and
// everything it brings (Kubernetes clients, cloud storage SDKs), must stay
// in the worker binary's module (cmd/worker), out of every user's build.
package buildlist
