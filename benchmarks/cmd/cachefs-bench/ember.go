package main

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// The ember workload builds a new ember-cli app whose node_modules are
// on the mount. The app is made once, from the npm registry, into the
// work directory's cache; each system gets a copy in its export.
const (
	// emberCLI is the pinned ember-cli that makes the app: 6.4, an LTS
	// release whose default blueprint is the classic (broccoli) build
	// that `ember build` runs, and whose engines accept node 18 (Debian
	// 12's) and 20. Later releases make Vite apps and want node 20.19.
	emberCLI = "6.4.0"
	// emberApp is the app's name and directory ("app" is refused).
	emberApp = "bench-app"
	// emberNodeMajor is the oldest node ember-cli 6.4 runs on.
	emberNodeMajor = 18
)

// makeEmberApp runs `ember new` of the pinned ember-cli in dir, which
// installs the app's packages with npm.
func (r *runner) makeEmberApp(dir string) error {
	if err := checkNode(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := command(ctx, dir, nil, "npm", "ping"); err != nil {
		return fmt.Errorf("npm registry unreachable: %v", err)
	}
	ctx, cancel = context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	_, err := command(ctx, dir, []string{"CI=true"}, "npx", "--yes", "ember-cli@"+emberCLI,
		"new", emberApp, "--skip-git")
	return err
}

// checkNode wants node and npm, and node new enough for emberCLI.
func checkNode() error {
	for _, tool := range []string{"node", "npm", "npx"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%s not found (benchmarks/run.sh installs nodejs and npm)", tool)
		}
	}
	out, err := exec.Command("node", "--version").Output()
	if err != nil {
		return fmt.Errorf("node --version: %v", err)
	}
	v := strings.TrimPrefix(strings.TrimSpace(string(out)), "v")
	major, _ := strconv.Atoi(strings.Split(v, ".")[0])
	if major < emberNodeMajor {
		return fmt.Errorf("node %s is older than ember-cli %s needs (%d)", v, emberCLI, emberNodeMajor)
	}
	return nil
}

// noteEmberApp records what the app is made of, once.
func (r *runner) noteEmberApp(app string) {
	var entries, bytes int64
	filepath.WalkDir(filepath.Join(app, "node_modules"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		entries++
		if info, err := d.Info(); err == nil && d.Type().IsRegular() {
			bytes += info.Size()
		}
		return nil
	})
	pkgs, _ := os.ReadDir(filepath.Join(app, "node_modules"))
	r.notef("ember build: an app made by `npx ember-cli@%s new %s --skip-git` (ember-source %s); "+
		"its node_modules: %d entries at the top, %d in all, %.0f MiB", emberCLI, emberApp,
		packageVersion(app, "ember-source"), len(pkgs), entries, float64(bytes)/(1<<20))
}

func packageVersion(app, pkg string) string {
	b, _ := os.ReadFile(filepath.Join(app, "node_modules", pkg, "package.json"))
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), `"version": "`); ok {
			return strings.TrimSuffix(strings.TrimSuffix(rest, ","), `"`)
		}
	}
	return "unknown"
}

// emberEnv makes the build's temporary files, including the persistent
// Babel cache of broccoli-persistent-filter, go to the run's scratch
// directory outside the mount, as a guest's /tmp would be; CI is
// cleared because it turns that cache off.
func emberEnv(r *runner) []string {
	return []string{"TMPDIR=" + r.scratch, "CI="}
}

// runEmberBuild runs the app's own ember-cli (from node_modules on the
// mount) to make a development build into dist/ on the mount.
func runEmberBuild(ctx context.Context, r *runner, dir string) (string, error) {
	app := filepath.Join(dir, emberApp)
	if _, err := command(ctx, app, emberEnv(r), "node", "node_modules/ember-cli/bin/ember",
		"build", "--environment=development"); err != nil {
		return "", err
	}
	n := 0
	err := filepath.WalkDir(filepath.Join(app, "dist"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			n++
		}
		return err
	})
	return fmt.Sprintf("%d files in dist", n), err
}
