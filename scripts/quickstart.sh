#!/usr/bin/env bash
# Quick start: builds cachefsd, exports a demo directory and mounts it
# through cachefs at /tmp/cachefs-demo/mnt, shows it, and unmounts.
# Pass KEEP=1 to leave the mount running in the foreground instead.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
go build -o bin/cachefsd ./cmd/cachefsd
demo=/tmp/cachefs-demo
mkdir -p "$demo/export" "$demo/mnt"
echo "hello from the host" > "$demo/export/hello.txt"
if [ "${KEEP:-0}" = 1 ]; then
	exec bin/cachefsd local --export "$demo/export" --ctl "$demo/ctl.sock" "$demo/mnt"
fi
bin/cachefsd local --export "$demo/export" --ctl "$demo/ctl.sock" "$demo/mnt" &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null || true' EXIT
for _ in $(seq 50); do mountpoint -q "$demo/mnt" && break; sleep 0.1; done
echo "--- ls -l $demo/mnt"; ls -l "$demo/mnt"
echo "--- cat hello.txt"; cat "$demo/mnt/hello.txt"
echo "written in the guest" > "$demo/mnt/from-guest.txt"
echo "--- host sees: $(cat "$demo/export/from-guest.txt")"
echo "--- cachefsd ctl stats"; bin/cachefsd ctl --socket "$demo/ctl.sock" stats
