#!/usr/bin/env bash
# Installs what cachefs's tests and quick start need on a fresh Debian
# machine (run as root), and downloads the Go modules.
set -euo pipefail
# util-linux gives prlimit, which the integration tests run the server under.
need=()
for p in fuse3 fio inotify-tools util-linux; do
	dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq "${need[@]}" >/dev/null
fi
cd "$(dirname "$0")/.."
go mod download
