//go:build race

package onceflow_test

func init() { buildFlags = append(buildFlags, "-race") }
