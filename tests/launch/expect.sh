#!/bin/sh
# Usage: expect.sh [-c CODE] [-t MAX_SECONDS] [-p REGEX]... [-x REGEX]... -- command [args...]
#
# Runs the command with stdout and stderr captured together and checks: the
# exit code (default 0), that it finished within MAX_SECONDS (default 20), that
# every -p REGEX (grep -E) matches some output line and no -x REGEX does.
# Prints the output and what went wrong on failure.
set -u
code=0 max=20 want="" reject=""
nl='
'
while [ $# -gt 0 ]; do
  case $1 in
    -c) code=$2; shift 2 ;;
    -t) max=$2; shift 2 ;;
    -p) want="$want$2$nl"; shift 2 ;;
    -x) reject="$reject$2$nl"; shift 2 ;;
    --) shift; break ;;
    *) echo "expect.sh: bad argument '$1'" >&2; exit 2 ;;
  esac
done
out=$(mktemp)
trap 'rm -f "$out"' EXIT
start=$(date +%s%N)
"$@" >"$out" 2>&1
rc=$?
elapsed_ms=$(( ($(date +%s%N) - start) / 1000000 ))
cat "$out"
echo "--- exit code $rc after $elapsed_ms ms"
ok=1
[ "$rc" -eq "$code" ] || { echo "FAIL: expected exit code $code, got $rc"; ok=0; }
[ "$elapsed_ms" -le $((max * 1000)) ] || { echo "FAIL: took longer than $max s"; ok=0; }
printf '%s' "$want" | while IFS= read -r re; do
  grep -Eq -- "$re" "$out" || { echo "FAIL: no output line matches: $re"; exit 1; }
done || ok=0
printf '%s' "$reject" | while IFS= read -r re; do
  if grep -Eq -- "$re" "$out"; then echo "FAIL: an output line matches: $re"; exit 1; fi
done || ok=0
[ $ok -eq 1 ]
