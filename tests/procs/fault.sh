#!/bin/sh
# Usage: fault.sh COLLXRUN FAULT_CHILD NRANKS kill|exit VICTIM [COUNT]
#
# Runs fault_child on NRANKS ranks; rank VICTIM dies mid-all_reduce. Checks
# that every survivor reported status::peer_dead naming the victim (well
# within its 60 s deadline: this script allows 30 s in all), that the
# launcher named the victim's pid and how it ended, and that no shared
# memory object of the job is left in /dev/shm.
set -u
run=$1 child=$2 n=$3 mode=$4 victim=$5 count=${6:-}
out=$(mktemp) stamp=$(mktemp)
trap 'rm -f "$out" "$stamp"' EXIT
start=$(date +%s)
"$run" -n "$n" "$child" "$mode" "$victim" "$stamp" $count >"$out" 2>&1
rc=$?
elapsed=$(($(date +%s) - start))
cat "$out"
echo "--- exit code $rc after $elapsed s"
ok=1
fail() { echo "FAIL: $*"; ok=0; }
if [ "$mode" = kill ]; then
  want_rc=137 how="killed by signal 9 \\(SIGKILL\\)"
else
  want_rc=3 how="exited with code 3"
fi
[ "$rc" -eq "$want_rc" ] || fail "expected exit code $want_rc"
[ "$elapsed" -le 30 ] || fail "took longer than 30 s"
grep -Eq "^collxrun: rank $victim \\(pid [0-9]+\\) $how\$" "$out" || fail "the launcher did not name rank $victim"
survived=$(grep -Ec "^\\[[0-9]+\\] rank [0-9]+ survived: detected in [0-9.]+ ms: .*rank $victim \\(pid [0-9]+\\) died" "$out")
[ "$survived" -eq $((n - 1)) ] || fail "$survived of $((n - 1)) survivors reported rank $victim's death"
if grep -q "terminating the other" "$out"; then fail "survivors had to be terminated"; fi
# Segment names embed the creating rank's pid: none of this job's may remain.
for pid in $(sed -n 's/^\[[0-9]*\] rank [0-9]* pid \([0-9]*\)$/\1/p' "$out"); do
  if ls /dev/shm 2>/dev/null | grep -q "^collx-$pid-"; then fail "a segment of pid $pid is left in /dev/shm"; fi
done
[ $ok -eq 1 ]
