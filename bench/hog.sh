#!/usr/bin/env bash
# bench/hog.sh — a loaded machine on demand: one busy loop per online CPU,
# unpinned, at normal priority (what a data loader or a build does to a
# training node's CPUs).
#
#   bench/hog.sh start PIDFILE    start the loops, write their pids to PIDFILE
#   bench/hog.sh stop PIDFILE     stop the loops PIDFILE names, remove it
#   bench/hog.sh run CMD...       start, run CMD, stop (also when CMD fails or
#                                 the script is interrupted); CMD's exit status
#
# Only processes this script started are ever stopped: stop kills the pids in
# its own pid file, and only if each is still a shell running the loop.
set -euo pipefail

usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"; }

start() {
  local pidfile=$1 i
  : >"$pidfile"
  for ((i = 0; i < $(nproc); i++)); do
    bash -c 'exec -a collx-hog bash -c "while :; do :; done"' &
    echo $! >>"$pidfile"
  done
}

stop() {
  local pidfile=$1 pid
  [ -f "$pidfile" ] || return 0
  while read -r pid; do
    # Our loop still has this pid: its command line says so.
    if tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q '^collx-hog '; then kill "$pid" 2>/dev/null || true; fi
  done <"$pidfile"
  rm -f "$pidfile"
}

case "${1:-}" in
  start) [ $# -eq 2 ] || { usage >&2; exit 2; }; start "$2" ;;
  stop) [ $# -eq 2 ] || { usage >&2; exit 2; }; stop "$2" ;;
  run)
    shift
    [ $# -ge 1 ] || { usage >&2; exit 2; }
    pidfile=$(mktemp)
    trap 'stop "$pidfile"' EXIT INT TERM
    start "$pidfile"
    rc=0
    "$@" || rc=$?
    exit "$rc" ;;
  -h|--help) usage ;;
  *) usage >&2; exit 2 ;;
esac
