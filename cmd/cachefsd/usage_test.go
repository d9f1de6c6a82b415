//go:build linux

package main

import (
	"flag"
	"strings"
	"testing"
	"time"
)

// TestUsage: the top-level usage names every command and every flag of
// each, ctl --help its subcommands, and --version the version.
func TestUsage(t *testing.T) {
	out, stderr, err := run(30*time.Second, cachefsdBin, "--help")
	if err != nil {
		t.Fatalf("cachefsd --help: %v\n%s", err, stderr)
	}
	for _, cmd := range []string{"serve", "mount", "local", "ctl", "version", "--version"} {
		if !strings.Contains(out, "cachefsd "+cmd) {
			t.Errorf("usage does not show the command %q:\n%s", cmd, out)
		}
	}
	for _, fl := range commandFlags() {
		fl.VisitAll(func(f *flag.Flag) {
			if !strings.Contains(out, "--"+f.Name+" ") && !strings.Contains(out, "--"+f.Name+"\n") {
				t.Errorf("usage does not show %s's flag --%s", fl.Name(), f.Name)
			}
		})
	}
	ctlOut, stderr, err := run(30*time.Second, cachefsdBin, "ctl", "--help")
	if err != nil {
		t.Errorf("cachefsd ctl --help: %v\n%s", err, stderr)
	}
	for _, sub := range []string{"stats", "ping", "modes", "register", "unregister", "flush"} {
		if !strings.Contains(ctlOut+stderr, "  "+sub) {
			t.Errorf("ctl --help does not list %q:\n%s%s", sub, ctlOut, stderr)
		}
		if !strings.Contains(out, " "+sub) {
			t.Errorf("usage does not list ctl %q", sub)
		}
	}
	v, stderr, err := run(30*time.Second, cachefsdBin, "--version")
	if err != nil || !strings.HasPrefix(v, "cachefsd ") {
		t.Errorf("cachefsd --version: %q, %v %s; want \"cachefsd VERSION ...\"", v, err, stderr)
	}
}

// TestVersionFromLdflags: a version set at build time is the one shown.
func TestVersionFromLdflags(t *testing.T) {
	old := version
	defer func() { version = old }()
	version = "v9.8.7"
	if got := versionString(); !strings.HasPrefix(got, "cachefsd v9.8.7 ") {
		t.Errorf("versionString() = %q, want it to start with \"cachefsd v9.8.7 \"", got)
	}
}
