//go:build linux

package main

import (
	"log"
	"path/filepath"
	"strings"

	"github.com/cachefs/cachefs/cachefs"
)

// stateDirFor returns the default state directory of a mount at mnt:
// one per mountpoint under defaultStateDir.
func stateDirFor(mnt string) string {
	abs, _ := filepath.Abs(mnt)
	return filepath.Join(defaultStateDir(), strings.ReplaceAll(strings.Trim(abs, "/"), "/", "_"))
}

// removeStateDir removes the state directory of fs, mounted at mnt,
// once it stopped serving, unless it holds changes still to be written
// back: the default one, so that mounts leave no directory behind. One
// given by --state-dir is kept, and its spare staging files with it, for
// the next daemon.
func (g *guestFlags) removeStateDir(fs *cachefs.FS, mnt string) {
	if g.stateDir != stateDirFor(mnt) {
		return
	}
	removed, err := fs.RemoveStateDir()
	switch {
	case err != nil:
		log.Printf("cachefsd: removing the state directory: %v", err)
	case !removed:
		log.Printf("cachefsd: %s keeps changes not written back: the next mount of %s writes them back", g.stateDir, mnt)
	}
}
