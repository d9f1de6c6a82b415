#!/usr/bin/env bash
# Builds the host side for macOS from here, so that a Linux-only call can
# never land in it again: cachefsd for darwin/arm64 and darwin/amd64
# (no cgo: FSEvents is called through purego), go vet, and the tests of
# each package compiled (go test -c) for darwin.
#
# The guest's packages run inside the Linux VM only (FUSE, io_uring,
# inotify actuation) and are not built for darwin; cmd/cachefsd keeps
# its guest commands behind //go:build linux with darwin stubs. Every
# other package, present or future, must build for darwin.
set -euo pipefail
cd "$(dirname "$0")/.."
guest_only='^github.com/cachefs/cachefs/(cachefs|cachefs/overlay|internal/fuseuring|internal/posixtest|internal/harness|internal/inproc|benchmarks/cmd/[^/]+)$'
mapfile -t pkgs < <(go list ./... | grep -Ev "$guest_only")
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for arch in arm64 amd64; do
	export GOOS=darwin GOARCH=$arch CGO_ENABLED=0
	go build -o "$out/cachefsd-$arch" ./cmd/cachefsd
	go vet "${pkgs[@]}"
	for p in "${pkgs[@]}"; do
		go test -c -o "$out/" "$p" >"$out/log" 2>&1 || { cat "$out/log"; exit 1; }
	done
	echo "darwin/$arch: cachefsd built; ${#pkgs[@]} packages vetted and their tests compiled"
done
