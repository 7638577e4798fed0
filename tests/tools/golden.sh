#!/bin/sh
# tests/tools/golden.sh GOLDEN CMD ARGS... — runs CMD and compares its output
# with the file GOLDEN; on a difference prints the unified diff and fails.
# COLLX_UPDATE_GOLDEN=1 rewrites GOLDEN instead (then review the diff in git).
golden=$1
shift
out=$("$@") || { echo "golden.sh: '$*' exited with $?" >&2; exit 1; }
if [ "${COLLX_UPDATE_GOLDEN:-0}" = 1 ]; then
  printf '%s\n' "$out" >"$golden"
  echo "golden.sh: wrote $golden"
  exit 0
fi
printf '%s\n' "$out" | diff -u "$golden" - || { echo "golden.sh: output differs from $golden" >&2; exit 1; }
