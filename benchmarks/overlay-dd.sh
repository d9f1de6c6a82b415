#!/usr/bin/env bash
# 1 KiB dd writes into a delegated subtree of `cachefsd local`, served as
# an overlay (the default) and by FUSE delegated (--overlay=false),
# against a native dd on the same disk, interleaved in each round of the
# same run (docs/overlay.md, issue #16: 100,000 x 1 KiB within 1.1x).
#
#   benchmarks/overlay-dd.sh [count] [rounds] [link delay]
#
# Defaults: 100000 writes, 3 rounds, 50us. Each round: native dd, a dd
# into a bare overlay (mounted by hand over a plain directory, upper on
# the same disk, the mount options cachefsd uses, no daemon: the floor of
# overlayfs itself), then for each mode a fresh export, state directory and daemon, `ctl
# register --mode delegated` of a subtree, the dd into it, `ctl flush`
# (the time until the host has it), a check of the host's file size, and
# the daemon stopped. Prints each round and the medians, with the load
# average before and after. Needs root; B (default /var/tmp/ovdd) is the
# work directory, on the disk under test, and holds the export. G (default
# $B) holds the guest's side: the native dd, the bare overlay and the
# state directory (the upper directories). With G on a filesystem of its
# own (a loop-mounted ext4 image on the same disk, as a VM's disk is an
# image file on the host's), the host server's fanotify mark on the
# export's filesystem does not see the guest's writes, as in a VM; with G
# on the export's filesystem, `cachefsd local`'s in-process host reads an
# event per write.
set -euo pipefail
cd "$(dirname "$0")/.."
B=${B:-/var/tmp/ovdd}
G=${G:-$B}
count=${1:-100000}
rounds=${2:-3}
delay=${3:-50us}
mkdir -p $B $G
go build -o $B/cachefsd ./cmd/cachefsd
pid=""
stop() {
	[ -n "$pid" ] && kill $pid 2>/dev/null && wait $pid 2>/dev/null || true
	pid=""
	umount -l $B/mnt/d 2>/dev/null || true
	umount -l $B/mnt 2>/dev/null || true
	umount -l $G/bare/m 2>/dev/null || true
}
trap stop EXIT
now() { date +%s.%N; }
since() { echo "$(now) - $1" | bc; }

# start MODE: a fresh daemon with the subtree d registered delegated.
start() {
	local flag=--overlay=false
	[ "$1" = overlay ] && flag=--overlay
	rm -rf $B/export $G/state $B/mnt; mkdir -p $B/export/d $G/state $B/mnt
	$B/cachefsd local --export $B/export --ctl $B/ctl --state-dir $G/state --link-delay $delay $flag $B/mnt > $B/log.$1 2>&1 &
	pid=$!
	for _ in $(seq 100); do [ -S $B/ctl ] && $B/cachefsd ctl --socket $B/ctl ping >/dev/null 2>&1 && break; sleep 0.1; done
	$B/cachefsd ctl --socket $B/ctl register --mode delegated $B/mnt/d >/dev/null
	local fs; fs=$(stat -f -c %T $B/mnt/d)
	if [ "$1" = overlay ] && [ "$fs" != overlayfs ]; then echo "no overlay at $B/mnt/d ($fs)"; exit 1; fi
	if [ "$1" = fuse ] && [ "$fs" = overlayfs ]; then echo "an overlay at $B/mnt/d with --overlay=false"; exit 1; fi
}

ddw() { dd if=/dev/zero of="$1" bs=1k count=$count status=none; }
echo "dd $count x 1 KiB, $rounds rounds, link delay $delay; guest side on $(stat -f -c %T $G) ($(findmnt -n -o SOURCE --target $G)); loadavg $(cut -d' ' -f1-3 /proc/loadavg)"
declare -A res
: > $B/stats
for r in $(seq $rounds); do
	mkdir -p $G/native; rm -f $G/native/ddfile; sync
	s=$(now); ddw $G/native/ddfile; res[native,$r]=$(since $s)
	line="round $r: native ${res[native,$r]} s"
	rm -rf $G/bare; mkdir -p $G/bare/l $G/bare/u $G/bare/w $G/bare/m
	mount -t overlay overlay -o lowerdir=$G/bare/l,upperdir=$G/bare/u,workdir=$G/bare/w,redirect_dir=on,metacopy=on,index=on,xino=auto $G/bare/m
	sync; s=$(now); ddw $G/bare/m/ddfile; res[bare,$r]=$(since $s)
	umount $G/bare/m
	line="$line; bare overlay ${res[bare,$r]} s"
	for mode in overlay fuse; do
		start $mode; sync
		s=$(now); ddw $B/mnt/d/ddfile; res[$mode,$r]=$(since $s)
		s=$(now); $B/cachefsd ctl --socket $B/ctl flush >/dev/null; res[$mode-flush,$r]=$(since $s)
		$B/cachefsd ctl --socket $B/ctl stats | grep -E "kernel requests|overlay /" | sed "s/^/  $mode: /" >> $B/stats
		size=$(stat -c %s $B/export/d/ddfile)
		[ "$size" = $((count * 1024)) ] || { echo "host has $size bytes after $mode flush"; exit 1; }
		stop
		line="$line; $mode ${res[$mode,$r]} s (flush ${res[$mode-flush,$r]} s)"
	done
	echo "$line; loadavg $(cut -d' ' -f1-3 /proc/loadavg)"
done
median() { for r in $(seq $rounds); do echo "${res[$1,$r]}"; done | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
n=$(median native)
for k in native bare overlay overlay-flush fuse fuse-flush; do
	m=$(median $k)
	echo "median $k: $m s ($(echo "scale=2; $m / $n" | bc)x native)"
done
echo "FUSE requests of each cachefs run (ctl stats after its flush):"
cat $B/stats
rm -rf $G/native $G/bare $B/export $G/state $B/mnt
