#!/usr/bin/env bash
# Runs the cachefs benchmark suite: installs what it needs (Debian
# packages, only if missing), builds cachefsd, the go-fuse loopback,
# visibility and cachefs-bench, and measures every system x workload
# cell, then host-change visibility.
#
#   benchmarks/run.sh            full suite (hours on 2 shared cores); rewrites docs/benchmarks.md
#   benchmarks/run.sh --quick    small inputs, one run, no network (a few minutes)
#   benchmarks/run.sh --systems=native,loopback,cachefs-consistent-0 --workloads=dd,stat
#
# The ember workload makes its app once with npx (ember-cli from the npm
# registry) into WORK/cache; it is not in --quick's default set, and is
# skipped with the reason in the report if the app cannot be made.
#
# Other flags go to cachefs-bench (--runs, --work, --out, --timeout; see
# `cachefs-bench --help`). WORK (default /var/tmp/cachefs-bench) holds
# the inputs, exports, mountpoints and daemon logs; results go to
# benchmarks/out/. REVISION names the measured cachefs revision in the
# report (default: git describe --always --dirty).
set -euo pipefail
cd "$(dirname "$0")/.."
work=${WORK:-/var/tmp/cachefs-bench}
quick=0
# Only the default full suite (no --quick, --systems, --workloads or
# --runs) rewrites docs/benchmarks.md and benchmarks/results/; a
# targeted run writes only its --out directory.
publish=1
for a in "$@"; do
	case "$a" in
	--quick | -quick) quick=1 publish=0 ;;
	--work=*) work=${a#--work=} ;;
	--systems* | -systems* | --workloads* | -workloads* | --runs* | -runs*) publish=0 ;;
	esac
done

need=()
for p in fuse3 fio bindfs sshfs openssh-server openssh-client xz-utils; do
	dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
done
if [ "$quick" = 0 ]; then
	dpkg -s linux-source-6.1 >/dev/null 2>&1 || need+=(linux-source-6.1)
	# ember: Debian's nodejs (18) is new enough for ember-cli 6.4.
	command -v npm >/dev/null 2>&1 || need+=(nodejs npm)
fi
if [ ${#need[@]} -gt 0 ]; then
	echo "installing ${need[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq "${need[@]}" >/dev/null
fi

mkdir -p "$work/bin"
go build -o "$work/bin/cachefsd" ./cmd/cachefsd
go build -o "$work/bin/loopback" ./benchmarks/loopback
go build -o "$work/bin/visibility" ./benchmarks/cmd/visibility
go build -o "$work/bin/cachefs-bench" ./benchmarks/cmd/cachefs-bench
go build -o "$work/bin/fuse-floor" ./benchmarks/cmd/fuse-floor

rev=${REVISION:-$(git describe --always --dirty 2>/dev/null || echo unknown)}
args=(--work "$work" --bin "$work/bin" --out benchmarks/out --revision "$rev" --command "benchmarks/run.sh${*:+ $*}")
if [ "$publish" = 1 ]; then
	args+=(--docs docs/benchmarks.md --publish benchmarks/results)
fi
# Our own --work=DIR was consumed above; pass the rest through.
pass=()
for a in "$@"; do
	case "$a" in --work=*) ;; *) pass+=("$a") ;; esac
done
exec "$work/bin/cachefs-bench" "${args[@]}" "${pass[@]}"
