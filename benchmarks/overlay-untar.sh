#!/usr/bin/env bash
# Untar of the kernel tree into a delegated subtree of `cachefsd local`,
# with the time until `ctl flush` has it all on the host, against a
# native untar on the same disk in the same run (docs/overlay.md).
#
#   benchmarks/overlay-untar.sh [overlay|fuse|bare] [link delay]
#
# overlay: cachefsd's default (delegated subtrees as overlays); fuse: the
# FUSE delegated mode (--overlay=false); bare: an overlay mounted by hand over the cached
# view, written back by nobody (the floor). Needs root, linux-source-6.1
# (decompressed once to $B/linux.tar) and bc. B (default
# /var/tmp/ovbench) holds the tarball, export, mountpoint and log; G
# (default $B) the guest's side: the native untar, the state directory
# (upper directories) and the bare overlay's upper directory. Put G on a
# filesystem of its own (a loop-mounted image, as a VM's disk is), else
# cachefsd local's in-process host reads a fanotify event for each of
# the guest's writes (benchmarks/overlay-dd.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
B=${B:-/var/tmp/ovbench}
G=${G:-$B}
[ -f $B/linux.tar ] || { mkdir -p $B; xz -dc /usr/src/linux-source-6.1.tar.xz > $B/linux.tar; }
go build -o $B/cachefsd ./cmd/cachefsd
mode=${1:-overlay}
delay=${2:-50us}
cleanup() {
	[ -n "${pid:-}" ] && kill $pid 2>/dev/null && wait $pid 2>/dev/null || true
	umount -l $B/mnt/k 2>/dev/null || true
	umount -l $B/mnt 2>/dev/null || true
}
trap cleanup EXIT
rm -rf $G/native $B/export $G/state $B/mnt $G/bare; mkdir -p $G/native $B/export/k $G/state $B/mnt
echo "guest side on $(stat -f -c %T $G) ($(findmnt -n -o SOURCE --target $G)); loadavg $(cut -d' ' -f1-3 /proc/loadavg)"
sync; echo 3 > /proc/sys/vm/drop_caches
s=$(date +%s.%N); tar -xf $B/linux.tar -C $G/native; e=$(date +%s.%N)
echo "native untar: $(echo "$e - $s" | bc) s"
rm -rf $G/native; sync
flag=--overlay=false; [ "$mode" = overlay ] && flag=--overlay
$B/cachefsd local ${PPROF:+--pprof $PPROF} --export $B/export --ctl $B/ctl --state-dir $G/state --link-delay $delay $flag $B/mnt > $B/log 2>&1 &
pid=$!
for i in $(seq 50); do [ -S $B/ctl ] && break; sleep 0.1; done
if [ "$mode" = bare ]; then
	# an overlay with no write-back, over the cached view: the floor
	$B/cachefsd ctl --socket $B/ctl register --mode cached $B/mnt/k >/dev/null
	rm -rf $G/bare; mkdir -p $G/bare/u $G/bare/w
	mount -t overlay overlay -o lowerdir=$B/mnt/k,upperdir=$G/bare/u,workdir=$G/bare/w,redirect_dir=on,metacopy=on,index=on,xino=auto $B/mnt/k
else
	$B/cachefsd ctl --socket $B/ctl register --mode delegated $B/mnt/k >/dev/null
fi
grep -q " $B/mnt/k overlay" /proc/mounts && echo "overlay mounted" || echo "no overlay at $B/mnt/k"
sync; echo 3 > /proc/sys/vm/drop_caches
s=$(date +%s.%N); tar -xf $B/linux.tar -C $B/mnt/k; e=$(date +%s.%N)
$B/cachefsd ctl --socket $B/ctl flush; f=$(date +%s.%N)
echo "$mode untar: $(echo "$e - $s" | bc) s, flush after it: $(echo "$f - $e" | bc) s, untar+flush: $(echo "$f - $s" | bc) s"
echo "host entries: $(find $B/export/k | wc -l); loadavg $(cut -d' ' -f1-3 /proc/loadavg)"
$B/cachefsd ctl --socket $B/ctl stats | grep -E "kernel requests|overlay /|^messages"
diff -r --no-dereference $B/mnt/k $B/export/k > $B/diff.txt 2>&1 && echo "trees equal (diff -r)" || echo "trees differ: $(wc -l < $B/diff.txt) lines in $B/diff.txt"
