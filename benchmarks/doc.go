// Package benchmarks holds cachefs's benchmark suite; its only Go code
// outside the commands is the quick test, which runs the suite at its
// small size and checks the results.
//
// # Layout
//
//   - run.sh installs what the suite needs (Debian packages, only when
//     missing), builds cachefsd, loopback, visibility and cachefs-bench,
//     and runs cachefs-bench with its arguments.
//   - cmd/cachefs-bench runs every system x workload cell, then
//     cmd/visibility, and writes out/results.{json,csv,md} and
//     out/chart.svg; the default full run also rewrites the results
//     section of docs/benchmarks.md and copies the chart and CSV to
//     results/.
//   - cmd/visibility times how long a host change takes to show in a
//     cached subtree of a cachefs mount it makes itself, idle and while
//     the host untars; with -json for cachefs-bench.
//   - cmd/fuse-rtt times one FUSE request answered from memory over
//     /dev/fuse and over FUSE-over-io_uring (a queue per CPU, served by
//     a thread pinned to it, through go-fuse's ProtocolServer): what
//     serving the kernel over io_uring would save per request. Not part
//     of the suite; run by hand as root.
//   - loopback is go-fuse's loopback file system with 1 s kernel
//     timeouts and without FUSE passthrough: the cost of FUSE alone.
//
// # Systems and workloads
//
// Both are tables (systems.go, workloads.go in cmd/cachefs-bench). A
// system is the native directory or a daemon mounting a copy of the
// input at a mountpoint under the work directory; one with a missing
// tool is skipped with the reason in the report. A workload names an
// input copied into each system's export (or an empty export, made
// anew per run when it writes), and one or more phases timed one after
// the other on one fresh mount, such as "stat walk cold" then "stat walk
// warm". Each phase returns a summary of what it saw (entries, packages,
// matching lines); a system that disagrees with the first one is marked.
// Inputs are made once into the work directory's cache before the first
// system; a workload whose input cannot be made (ember's app without
// the npm registry) is skipped with the reason. --quick's default set
// leaves out the workloads that need the network.
//
// # Measurements
//
// For each phase: wall time; CPU of the daemon and its descendants
// (utime+stime from /proc/PID/stat, before and after); for cachefs the
// upstream messages by op (cachefsd ctl --json stats, before and after);
// the daemon's VmHWM after it; the load average before it. A cell is a
// phase on a system over --runs runs (median, min, max); a phase that
// reaches --timeout is stopped and shown as a lower bound, and a cell
// whose first run took more than --repeat-below is not repeated.
//
// # Cleanup
//
// Daemons run in their own process groups with SIGTERM as their parent
// death signal. On exit or SIGINT/SIGTERM/SIGHUP the suite stops every
// daemon (each unmounts on SIGTERM; lazy umount and SIGKILL after 20 s),
// and a new run first unmounts anything left under the work directory.
package benchmarks
