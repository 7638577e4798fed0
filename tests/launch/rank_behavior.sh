#!/bin/sh
# Usage: rank_behavior.sh FAIL_RANK ACTION [OTHERS]
#
# A rank started by collxrun (COLLX_RANK set). Rank FAIL_RANK does ACTION:
#   exit:N       exit with code N
#   signal:NAME  kill itself with signal NAME (e.g. KILL, SEGV)
# every other rank does OTHERS:
#   sleep     sleep 30 s (default): must be terminated by the launcher
#   stubborn  ignore SIGTERM, then sleep 30 s: needs SIGKILL
#   linger    sleep 1 s, print "rank R finished" and exit 0 (within the
#             launcher's grace period after another rank failed)
#   talk      print "out R/N" on stdout, "err R" on stderr, then "tail R"
#             without a newline, and exit 0
set -u
if [ "$COLLX_RANK" = "$1" ]; then
  # Let the other ranks reach their steady state (e.g. install their SIGTERM
  # trap) before failing; otherwise the test races the shells' start-up.
  sleep 0.5
  case $2 in
    exit:*) exit "${2#exit:}" ;;
    signal:*) kill -s "${2#signal:}" $$; sleep 5; exit 99 ;;
  esac
  echo "rank_behavior.sh: unknown action $2" >&2
  exit 98
fi
case ${3:-sleep} in
  sleep) exec sleep 30 ;;
  stubborn) trap '' TERM; sleep 30 ;;  # sleep inherits the ignored SIGTERM
  linger) sleep 1.2; echo "rank $COLLX_RANK finished" ;;
  talk)
    echo "out $COLLX_RANK/$COLLX_SIZE"
    echo "err $COLLX_RANK" >&2
    printf 'tail %s' "$COLLX_RANK"
    ;;
esac
