#!/bin/sh
# tests/tools/probe_json.sh PROBE SCHEMA: runs `PROBE --quick --json` and
# validates its report against SCHEMA (check_schema.py); then checks that a
# report missing a required key and one with a wrong type are rejected, so a
# validator that accepts everything fails this test.
set -u
probe=$1 schema=$2
here=$(dirname "$0")
out=$(mktemp) bad=$(mktemp)
trap 'rm -f "$out" "$bad"' EXIT
"$probe" --quick --json >"$out" || { echo "probe_json.sh: $probe --quick --json failed"; exit 1; }
python3 "$here/check_schema.py" "$schema" "$out" || exit 1
python3 - "$out" "$bad" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
del d["measure"]["barrier_us"]
d["compare"][0]["sizes"][0]["pick"] = 42
json.dump(d, open(sys.argv[2], "w"))
PY
if python3 "$here/check_schema.py" "$schema" "$bad" >"$bad.log"; then
  echo "probe_json.sh: the validator accepted a broken report"; cat "$bad.log"; rm -f "$bad.log"; exit 1
fi
grep -q "missing required key 'barrier_us'" "$bad.log" && grep -q "pick: expected string" "$bad.log" ||
  { echo "probe_json.sh: the validator missed a violation"; cat "$bad.log"; rm -f "$bad.log"; exit 1; }
rm -f "$bad.log"
echo "probe_json.sh: the report validates against $schema"
