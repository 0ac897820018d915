package onceflow_test

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/zip"
)

const modulePath = "github.com/onceflow/onceflow"

// buildFlags are the scratch module's build flags: -race when this test
// runs under -race (release_race_test.go), so that it reuses the
// dependencies the test run has already compiled.
var buildFlags []string

// TestReleaseBuildsOutsideTheWorkspace proves the release procedure
// (docs/releasing.md) without publishing: it serves this checkout's HEAD
// as a pseudo-version from a file GOPROXY, as the Go proxy would serve a
// tag, and builds a module outside the workspace that requires it and
// imports the activity, idemstore and worker packages, with
// GOWORK=off go build ./... and no replace directive.
func TestReleaseBuildsOutsideTheWorkspace(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	root, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	proxy := t.TempDir()
	version, goMod, info := moduleZip(t, root, filepath.Join(proxy, "zip"))
	dir := filepath.Join(proxy, filepath.FromSlash(modulePath), "@v")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(proxy, "zip"), filepath.Join(dir, version+".zip")); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string][]byte{"list": []byte(version + "\n"), version + ".mod": goMod, version + ".info": info} {
		if err := os.WriteFile(filepath.Join(dir, name), body, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	user := t.TempDir()
	sum, err := os.ReadFile(filepath.Join(root, "go.sum")) // the dependencies' hashes, so none is looked up
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"go.mod": "module example.com/releasecheck\n\ngo 1.26.8\n\nrequire " + modulePath + " " + version + "\n",
		"go.sum": string(sum),
		"main.go": `package main

import (
	"context"
	"fmt"

	onceactivity "github.com/onceflow/onceflow/activity"
	"github.com/onceflow/onceflow/idemstore"
	"github.com/onceflow/onceflow/worker"
)

func main() {
	w, err := worker.New(worker.Config{Dev: true, Register: func(r worker.Registry) error {
		onceactivity.Register(r.Worker, r.Activities,
			func(context.Context, string) (string, error) { return idemstore.ExecutorConfig{}.Codec, nil }, onceactivity.Name("ReleaseCheck"))
		return nil
	}})
	fmt.Println(w != nil, err)
}
`,
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(user, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	defaultProxy, err := exec.Command("go", "env", "GOPROXY").Output()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", append(append([]string{"build"}, buildFlags...), "./...")...)
	cmd.Dir = user
	cmd.Env = append(os.Environ(),
		"GOWORK=off",
		"GOFLAGS=-mod=mod",
		"GOPROXY=file://"+filepath.ToSlash(proxy)+","+strings.TrimSpace(string(defaultProxy)),
		"GONOPROXY=none",        // even under a GOPRIVATE that names the module: the file proxy serves it
		"GONOSUMDB="+modulePath, // a pseudo-version the checksum database has never seen
		"GONOSUMCHECK=1",
	)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("GOWORK=off go build ./... of a module requiring %s %s: %v\n%s", modulePath, version, err, out)
	}
	t.Logf("built a module requiring %s %s outside the workspace in %v", modulePath, version, time.Since(start).Round(time.Millisecond))
}

// moduleZip writes the module zip of HEAD (or, outside a Git checkout,
// of the directory) to zipPath and returns its pseudo-version, its go.mod
// and its .info file.
func moduleZip(t *testing.T, root, zipPath string) (version string, goMod, info []byte) {
	t.Helper()
	f, err := os.Create(zipPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	git := func(args ...string) (string, error) {
		cmd := exec.Command("git", args...)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "TZ=UTC")
		out, err := cmd.Output()
		return strings.TrimSpace(string(out)), err
	}
	when := time.Now().UTC()
	rev := "000000000000"
	fromGit := false
	if out, err := git("log", "-1", "--format=%cd %H", "--date=format-local:%Y%m%d%H%M%S"); err == nil {
		stamp, hash, _ := strings.Cut(out, " ")
		if w, err := time.Parse("20060102150405", stamp); err == nil && len(hash) >= 12 {
			when, rev, fromGit = w, hash[:12], true
		}
	}
	version = module.PseudoVersion("v0", "", when, rev)
	m := module.Version{Path: modulePath, Version: version}
	if fromGit {
		err = zip.CreateFromVCS(f, m, root, "HEAD", "")
		if out, gitErr := git("show", "HEAD:go.mod"); gitErr == nil {
			goMod = []byte(out + "\n")
		}
	}
	var vcsErr *zip.UnrecognizedVCSError
	if !fromGit || errors.As(err, &vcsErr) {
		if _, err := f.Seek(0, 0); err != nil {
			t.Fatal(err)
		}
		if err := f.Truncate(0); err != nil {
			t.Fatal(err)
		}
		err = zip.CreateFromDir(f, m, root)
		goMod = nil
	}
	if err != nil {
		t.Fatalf("module zip of %s: %v", root, err)
	}
	if goMod == nil {
		if goMod, err = os.ReadFile(filepath.Join(root, "go.mod")); err != nil {
			t.Fatal(err)
		}
	}
	info, err = json.Marshal(map[string]any{"Version": version, "Time": when.Format(time.RFC3339)})
	if err != nil {
		t.Fatal(err)
	}
	return version, goMod, info
}

// TestCmdModuleHasNoReplace keeps `go install
// github.com/onceflow/onceflow/cmd/worker@vX.Y.Z` working: the go command
// refuses to install a module whose go.mod has a replace directive, so
// cmd/go.mod never carries one (go.work joins the modules in a clone).
func TestCmdModuleHasNoReplace(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join("cmd", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := modfile.Parse("cmd/go.mod", data, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range f.Replace {
		t.Errorf("cmd/go.mod replaces %s with %s: `go install …/cmd/worker@version` would refuse it", r.Old.Path, r.New.Path)
	}
	required := false
	for _, r := range f.Require {
		if r.Mod.Path == modulePath {
			required = true
		}
	}
	if !required {
		t.Errorf("cmd/go.mod does not require %s", modulePath)
	}
}
