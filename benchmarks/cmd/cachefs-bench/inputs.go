package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// sizes are the inputs of one suite size.
type sizes struct {
	DDCount  int      // 1 KiB blocks written by dd
	Tree     string   // "kernel" (Debian's linux-source-6.1) or "small" (generated)
	GoSrc    []string // directories of GOROOT/src copied for go list; nil: all of it
	BigDir   int      // files in the directory ls -l lists
	FioJobs  int
	FioFiles int // files per fio job
	// VisSamples is the changes cmd/visibility times per phase.
	VisSamples int
}

var fullSize = sizes{DDCount: 100000, Tree: "kernel", BigDir: 100000, FioJobs: 2, FioFiles: 10000,
	VisSamples: 200}

var quickSize = sizes{DDCount: 2000, Tree: "small", GoSrc: []string{"go"}, BigDir: 1000, FioJobs: 2,
	FioFiles: 100, VisSamples: 50}

const kernelTarXz = "/usr/src/linux-source-6.1.tar.xz"

// inputNames maps an input to the name of its copy in an export.
var inputNames = map[string]string{"tree": "tree", "gosrc": "src", "ember": emberApp, "bigdir": "big"}

// inputDir returns the cached original of an input, making it once.
func (r *runner) inputDir(name string) (string, error) {
	switch name {
	case "tree":
		if r.size.Tree == "kernel" {
			return r.cached("kernel", extractKernel, "linux-source-6.1")
		}
		return r.cached("small-tree-1000", makeSmallTree, "")
	case "gosrc":
		dir, err := r.cached("gosrc-"+r.sizeName(), r.copyGoSrc, "src")
		if err == nil && !r.goListChecked {
			err = r.checkGoList(dir)
			r.goListChecked = err == nil
		}
		return dir, err
	case "ember":
		dir, err := r.cached("ember-cli-"+emberCLI, r.makeEmberApp, emberApp)
		if err == nil && !r.emberNoted {
			r.noteEmberApp(dir)
			r.emberNoted = true
		}
		return dir, err
	case "bigdir":
		return r.cached(fmt.Sprintf("bigdir-%d", r.size.BigDir), r.makeBigDir, "")
	}
	return "", fmt.Errorf("unknown input %q", name)
}

// inputTar returns the tarball the untar workload extracts: the kernel
// source decompressed once, so that tar's time is the file system's and
// not xz's; or the small tree.
func (r *runner) inputTar() (string, error) {
	if r.size.Tree == "kernel" {
		return r.cachedFile("kernel.tar", func(tmp string) error {
			return shell("xz -dc " + kernelTarXz + " > " + tmp)
		})
	}
	tree, err := r.inputDir("tree")
	if err != nil {
		return "", err
	}
	return r.cachedFile("small-tree-1000.tar", func(tmp string) error {
		return run("tar", "-cf", tmp, "-C", filepath.Dir(tree), filepath.Base(tree))
	})
}

// cached makes cache/name with mk (into a temporary directory renamed at
// the end, so an interrupted run starts over) and returns cache/name/sub.
func (r *runner) cached(name string, mk func(dir string) error, sub string) (string, error) {
	dir := filepath.Join(r.cfg.Work, "cache", name)
	if _, err := os.Stat(dir); err != nil {
		r.logf("preparing input %s", dir)
		tmp := dir + ".tmp"
		os.RemoveAll(tmp)
		if err := os.MkdirAll(tmp, 0o755); err != nil {
			return "", err
		}
		if err := mk(tmp); err != nil {
			return "", fmt.Errorf("preparing %s: %v", name, err)
		}
		if err := os.Rename(tmp, dir); err != nil {
			return "", err
		}
	}
	return filepath.Join(dir, sub), nil
}

func (r *runner) cachedFile(name string, mk func(tmp string) error) (string, error) {
	p := filepath.Join(r.cfg.Work, "cache", name)
	if _, err := os.Stat(p); err == nil {
		return p, nil
	}
	r.logf("preparing input %s", p)
	os.MkdirAll(filepath.Dir(p), 0o755)
	if err := mk(p + ".tmp"); err != nil {
		return "", fmt.Errorf("preparing %s: %v", name, err)
	}
	return p, os.Rename(p+".tmp", p)
}

func extractKernel(dir string) error {
	if _, err := os.Stat(kernelTarXz); err != nil {
		return fmt.Errorf("%s missing (apt-get install linux-source-6.1)", kernelTarXz)
	}
	return run("tar", "-xf", kernelTarXz, "-C", dir)
}

// makeSmallTree generates the quick suite's stand-in for the kernel
// tree: 20 directories of 50 text files, some naming grepPattern, and
// a few symlinks.
func makeSmallTree(dir string) error {
	for d := 0; d < 20; d++ {
		sub := filepath.Join(dir, fmt.Sprintf("d%02d", d/8), fmt.Sprintf("sub%02d", d))
		if err := os.MkdirAll(sub, 0o755); err != nil {
			return err
		}
		for f := 0; f < 50; f++ {
			var b strings.Builder
			for l := 0; l < 10+(d*50+f)%150; l++ {
				fmt.Fprintf(&b, "int f%d_%d_%d(void) { return %d; }\n", d, f, l, l)
				if (d+f+l)%37 == 0 {
					fmt.Fprintf(&b, "%s(f%d_%d_%d);\n", grepPattern, d, f, l)
				}
			}
			if err := os.WriteFile(filepath.Join(sub, fmt.Sprintf("f%02d.c", f)), []byte(b.String()), 0o644); err != nil {
				return err
			}
		}
		if d%8 == 0 {
			os.Symlink("f00.c", filepath.Join(sub, "link.c"))
		}
	}
	return nil
}

// copyGoSrc copies GOROOT/src (or r.size.GoSrc of it, with go.mod) to
// dir/src. go list ./... there sees a module named std whose packages
// are std/...; their imports of the standard library resolve to the
// real GOROOT, which refuses imports of its internal packages from
// std/... with "use of internal package ... not allowed". Those errors
// are expected; checkGoList makes sure they are the only ones. The
// copy's files are all read; GOROOT's are on the native disk.
func (r *runner) copyGoSrc(dir string) error {
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		return fmt.Errorf("go env GOROOT: %v", err)
	}
	src := filepath.Join(strings.TrimSpace(string(out)), "src")
	dst := filepath.Join(dir, "src")
	if r.size.GoSrc == nil {
		return run("cp", "-a", src, dst)
	}
	os.MkdirAll(dst, 0o755)
	for _, p := range append([]string{"go.mod"}, r.size.GoSrc...) {
		if err := run("cp", "-a", filepath.Join(src, p), filepath.Join(dst, p)); err != nil {
			return err
		}
	}
	return nil
}

// checkGoList lists the copy natively and fails on any error other than
// the expected internal-import ones.
func (r *runner) checkGoList(dir string) error {
	cmd := exec.Command("go", "list", "-e", "-f", "{{.ImportPath}}\t{{with .Error}}{{.Err}}{{end}}", "./...")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), goEnv...)
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("go list: %v", err)
	}
	pkgs, internal := 0, 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		path, msg, _ := strings.Cut(line, "\t")
		pkgs++
		switch {
		case msg == "":
		case strings.Contains(msg, "use of internal package"):
			internal++
		default:
			return fmt.Errorf("go list: unexpected error in %s: %s", path, msg)
		}
	}
	r.notef("go list ./... over the copy of GOROOT/src: %d packages, %d of them with only the expected "+
		"\"use of internal package\" errors, no other errors", pkgs, internal)
	return nil
}

func (r *runner) makeBigDir(dir string) error {
	for i := 0; i < r.size.BigDir; i++ {
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("f%06d", i)))
		if err != nil {
			return err
		}
		f.Close()
	}
	return nil
}

func run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %v: %s", name, err, firstLines(string(out), 3))
	}
	return nil
}

func shell(script string) error { return run("sh", "-c", script) }
