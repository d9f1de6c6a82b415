#!/usr/bin/env bash
# Installs what cachefs's tests and quick start need on a fresh Debian
# machine (run as root), and downloads the Go modules.
set -euo pipefail
# util-linux gives prlimit, which the integration tests run the server under;
# procps /bin/kill, which the systemd units' ExecStop runs (their tests too).
need=()
for p in fuse3 fio inotify-tools util-linux procps; do
	dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq "${need[@]}" >/dev/null
fi
# FUSE over io_uring (Linux 6.14+) is off until the fuse module's
# enable_uring is on; cachefsd serves its mounts over it where it is
# (cmd/cachefsd/uring.go), and the tests of that transport need it.
p=/sys/module/fuse/parameters/enable_uring
if [ -w "$p" ] && [ "$(cat "$p")" != Y ]; then
	echo Y > "$p" || echo "setup: cannot turn on FUSE over io_uring; mounts use /dev/fuse"
fi
cd "$(dirname "$0")/.."
go mod download
