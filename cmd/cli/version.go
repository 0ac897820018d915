package cli

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// libraryModule is the library's module path.
const libraryModule = "github.com/onceflow/onceflow"

// Version prints a worker binary's version from its build info (the
// `version` command of cmd/worker and of the order example's binary): the
// module version `go install …/cmd/worker@vX.Y.Z` stamps ("(devel)" for a
// build from a checkout), the library's, Go's and the platform.
func Version(out io.Writer) error {
	v, lib := "(devel)", "(devel)"
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" {
			v = bi.Main.Version
		}
		for _, d := range bi.Deps {
			if d.Path == libraryModule {
				lib = d.Version
				if d.Replace != nil {
					lib = d.Replace.Version
					if lib == "" {
						lib = "(devel, " + d.Replace.Path + ")"
					}
				}
			}
		}
	}
	_, err := fmt.Fprintf(out, "onceflow worker %s (library %s, %s, %s/%s)\n", v, lib, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return err
}
