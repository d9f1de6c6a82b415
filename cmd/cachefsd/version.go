package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// version is set when building a release:
//
//	go build -ldflags "-X main.version=v1.2.3" ./cmd/cachefsd
//
// Empty: the module version and VCS revision Go recorded in the binary.
var version string

// versionString returns the --version line.
func versionString() string {
	v := version
	if v == "" {
		v = builtVersion()
	}
	return fmt.Sprintf("cachefsd %s %s %s/%s", v, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// builtVersion returns what the build recorded: the module version
// (v1.2.3 from go install ...@v1.2.3, else "(devel)") and the VCS
// revision, marked +dirty when the tree had changes.
func builtVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(unknown)"
	}
	v, rev, dirty := bi.Main.Version, "", ""
	for _, s := range bi.Settings {
		switch {
		case s.Key == "vcs.revision" && len(s.Value) >= 12:
			rev = " " + s.Value[:12]
		case s.Key == "vcs.modified" && s.Value == "true":
			dirty = "+dirty"
		}
	}
	if v == "" {
		v = "(devel)"
	}
	return v + rev + dirty
}
