#!/usr/bin/env bash
# The FUSE floor of the kernel untar: untars the Debian linux-source-6.1
# tarball natively and into benchmarks/cmd/fuse-floor (every request
# answered from memory, contents passed through to backing files) over
# /dev/fuse and over FUSE over io_uring, one after the other, RUNS times
# each, and prints each time, the floor daemon's CPU seconds and the
# kernel's requests by opcode. No go-fuse file system can take the
# untar in less than the floor on this machine.
#
#   benchmarks/floor.sh            # 2 runs of each
#   RUNS=3 WORK=/var/tmp/floor benchmarks/floor.sh
#
# Needs root (mounts, passthrough, enable_uring) and linux-source-6.1
# (benchmarks/run.sh installs it). WORK must be on the disk under test.
set -euo pipefail
cd "$(dirname "$0")/.."
work=${WORK:-/var/tmp/cachefs-floor}
runs=${RUNS:-2}
src=/usr/src/linux-source-6.1.tar.xz
[ -f "$src" ] || { echo "floor: $src missing (apt-get install linux-source-6.1)" >&2; exit 1; }
mkdir -p "$work"
go build -o "$work/fuse-floor" ./benchmarks/cmd/fuse-floor
tarball=$work/linux.tar
[ -f "$tarball" ] || xz -dc "$src" > "$tarball"
uring=/sys/module/fuse/parameters/enable_uring
[ -w "$uring" ] && echo Y > "$uring"

# untar DIR: seconds to untar the tarball into DIR.
untar() {
	local s e
	s=$(date +%s.%N)
	(cd "$1" && tar -xf "$tarball")
	e=$(date +%s.%N)
	echo "$e - $s" | bc
}

# settle: the next run should not pay for this one's deletion.
settle() {
	rm -rf "$work/run"
	sync
	sleep "${SETTLE:-30}"
}

floor() {
	local mnt=$work/run/mnt pid t cpu
	mkdir -p "$mnt" "$work/run/scratch"
	"$work/fuse-floor" -scratch "$work/run/scratch" "$@" "$mnt" > "$work/run/floor.out" 2>&1 &
	pid=$!
	for _ in $(seq 100); do mountpoint -q "$mnt" && break; sleep 0.1; done
	t=$(untar "$mnt")
	cpu=$(awk '{print ($14+$15)/100}' "/proc/$pid/stat")
	kill "$pid"
	wait "$pid" || true
	printf "%-28s %6.1f s  daemon CPU %5.1f s  %s\n" "floor $*" "$t" "$cpu" "$(cat "$work/run/floor.out")"
}

for i in $(seq "$runs"); do
	settle
	mkdir -p "$work/run/native"
	printf "%-28s %6.1f s\n" native "$(untar "$work/run/native")"
	settle
	floor
	if [ "$(cat "$uring" 2>/dev/null)" = Y ]; then
		settle
		floor -uring
	fi
done
rm -rf "$work/run"
