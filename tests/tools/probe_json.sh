#!/bin/sh
# tests/tools/probe_json.sh PROBE SCHEMA: runs `PROBE --quick --json` and
# validates its report against SCHEMA (check_schema.py); then checks that a
# report missing a required key and one with a wrong type are rejected, so a
# validator that accepts everything fails this test. With REPLAY
# (collx-probe-replay), also judges the report with it: the counts it prints
# must be those of the report's own rows (its "the report's profile"
# judgement recomputes them independently), and a broken report must fail it;
# its refit holds the report's copy rate, and --caches refits with other sizes.
# Also checks that the model priced the measured cache sizes, and the look's
# with --look-caches.
set -u
probe=$1 schema=$2 replay=${3:-}
here=$(dirname "$0")
out=$(mktemp) bad=$(mktemp)
trap 'rm -f "$out" "$bad"' EXIT
"$probe" --quick --json >"$out" || { echo "probe_json.sh: $probe --quick --json failed"; exit 1; }
python3 "$here/check_schema.py" "$schema" "$out" || exit 1
# The measured choice (--online, on by default) ran at every size, and its
# summary counts what its rows say.
python3 - "$out" <<'PY' || exit 1
import json, sys
d = json.load(open(sys.argv[1]))
for c in d["compare"]:
    rows = c["sizes"]
    on = [r for r in rows if "online_measured_us" in r]
    if len(on) != len(rows) or not c.get("online_variants"):
        sys.exit(f"probe_json.sh: the measured choice ran at {len(on)} of {len(rows)} sizes of {c['collective']}")
    want = sum(r["online_measured_us"] <= 1.1 * r["fastest_measured_us"] for r in on)
    if c["summary"].get("online_within_10pct") != want or c["summary"].get("online_sizes") != len(on):
        sys.exit(f"probe_json.sh: online summary {c['summary']} against {want} of {len(on)} rows")
PY
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
# The cache sizes the model priced are the sweep's (measured by default), or
# the look's with --look-caches.
python3 - "$out" <<'PY' || exit 1
import json, sys
m = json.load(open(sys.argv[1]))["measure"]
c = m["caches"]
if c["source"] != "measured" or len(c.get("points", [])) < 4:
    sys.exit(f"probe_json.sh: the caches were not measured: {c}")
ws = [p[0] for p in c["points"]]
if ws != sorted(ws) or len(set(ws)) != len(ws):
    sys.exit(f"probe_json.sh: the sweep's working sets do not grow: {ws}")
if c["last_bytes"] > 0 and m["cache_bytes"] != c["last_bytes"]:
    sys.exit(f"probe_json.sh: the model priced a last level of {m['cache_bytes']}, the sweep found {c['last_bytes']}")
if c["near_bytes"] > 0 and m["near_cache_bytes"] != c["near_bytes"]:
    sys.exit(f"probe_json.sh: the model priced a near cache of {m['near_cache_bytes']}, the sweep found {c['near_bytes']}")
PY
"$probe" --quick --json --look-caches --colls all_gather --online 0 >"$bad" ||
  { echo "probe_json.sh: $probe --quick --json --look-caches failed"; exit 1; }
python3 - "$bad" <<'PY' || exit 1
import json, sys
m = json.load(open(sys.argv[1]))["measure"]
c = m["caches"]
if c["source"] != "look" or "points" in c or m["cache_bytes"] != c["look_last_bytes"]:
    sys.exit(f"probe_json.sh: --look-caches priced {m['cache_bytes']} with {c}")
PY
[ -n "$replay" ] || exit 0
"$replay" "$out" >"$bad.log" || { echo "probe_json.sh: $replay failed"; cat "$bad.log"; exit 1; }
expected=$(python3 - "$out" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
rows = [r for c in d["compare"] for r in c["sizes"]]
print(sum(r["pick_slowdown"] <= 0.1 + 1e-12 for r in rows), len(rows))
PY
)
got=$(sed -n '/^# the report.s profile, judged/,/^#/p' "$bad.log" | sed -n 's/.*all: pick within 10 % at \([0-9]*\) of \([0-9]*\).*/\1 \2/p')
[ "$got" = "$expected" ] || { echo "probe_json.sh: replay counted '$got', the report's rows '$expected'"; cat "$bad.log"; rm -f "$bad.log"; exit 1; }
printf '{"format": "collx-probe", "compare": []}' >"$bad"
if "$replay" "$bad" >/dev/null 2>&1; then echo "probe_json.sh: replay accepted a report without a profile"; exit 1; fi
# Several reports to fit on: every call of each is taken (here the same report twice).
calls=$(sed -n 's/^# .*: \([0-9]*\) measured calls.*/\1/p' "$bad.log")
"$replay" "$out,$out" "$out" --judge-profile preset:shm_host >"$bad.log" ||
  { echo "probe_json.sh: $replay with two reports to fit failed"; cat "$bad.log"; exit 1; }
twice=$(sed -n 's/^# .*: \([0-9]*\) measured calls.*/\1/p' "$bad.log")
[ -n "$calls" ] && [ "$twice" = "$((calls * 2))" ] ||
  { echo "probe_json.sh: fitting on the report twice took '$twice' calls, once '$calls'"; cat "$bad.log"; exit 1; }
grep -q "^# preset:shm_host, judged on" "$bad.log" && grep -A20 "^# preset:shm_host, judged on" "$bad.log" | grep -q "all: pick within" ||
  { echo "probe_json.sh: --judge-profile printed no judgement"; cat "$bad.log"; exit 1; }
if "$replay" "$out" --judge-profile preset:nope >"$bad.log" 2>&1 || ! grep -q "no preset named 'nope'" "$bad.log"; then
  echo "probe_json.sh: an unknown preset to judge was not refused by name"; cat "$bad.log"; exit 1
fi
# The refit holds the copy rate at the report's measured memcpy, as the probe's does.
"$replay" "$out" >"$bad.log" || exit 1
held=$(sed -n '/^  refitted:/,$p' "$bad.log" | sed -n 's/.* copy \([0-9.]*\), reduce.*/\1/p' | head -1)
want=$(python3 -c 'import json,sys; print("%.2f" % json.load(open(sys.argv[1]))["measure"]["copy_gbps"])' "$out")
[ -n "$held" ] && [ "$held" = "$want" ] ||
  { echo "probe_json.sh: the replay's refit has copy '$held' GB/s, the report measured $want"; cat "$bad.log"; exit 1; }
# Other cache sizes to refit with, and a bad pair refused.
"$replay" "$out" --caches 2M,32M >"$bad.log" && grep -q "^# refitting with the caches given: near 2M, last level 32M" "$bad.log" &&
  sed -n '/^  refitted:/,$p' "$bad.log" | grep -q "near cache 2M .*last level 32M" ||
  { echo "probe_json.sh: --caches 2M,32M was not refitted with"; cat "$bad.log"; exit 1; }
"$replay" "$out" --caches 2M >"$bad.log" 2>&1
[ $? -eq 2 ] && grep -q "needs NEAR,LAST sizes" "$bad.log" ||
  { echo "probe_json.sh: a bad --caches was not refused"; cat "$bad.log"; exit 1; }
rm -f "$bad.log"
echo "probe_json.sh: collx-probe-replay judged the report as its rows do ($got)"
