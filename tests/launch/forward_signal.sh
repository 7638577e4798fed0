#!/bin/sh
# Usage: forward_signal.sh COLLXRUN
#
# A SIGTERM sent to collxrun reaches every rank; collxrun exits with 143
# promptly and leaves no rank behind.
set -u
collxrun=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$collxrun" -n 3 sh -c "echo \$\$ > $dir/tmp.\$COLLX_RANK && mv $dir/tmp.\$COLLX_RANK $dir/pid.\$COLLX_RANK; exec sleep 30" &
launcher=$!
i=0
while [ "$(ls "$dir" | grep -c '^pid\.')" -lt 3 ]; do
  i=$((i + 1))
  if [ $i -gt 200 ]; then echo "FAIL: ranks did not start"; kill -9 $launcher; exit 1; fi
  sleep 0.05
done
start=$(date +%s%N)
kill -TERM $launcher
wait $launcher
rc=$?
elapsed_ms=$(( ($(date +%s%N) - start) / 1000000 ))
[ $rc -eq 143 ] || { echo "FAIL: expected exit code 143, got $rc"; exit 1; }
[ $elapsed_ms -lt 5000 ] || { echo "FAIL: collxrun took $elapsed_ms ms to stop"; exit 1; }
for f in "$dir"/pid.*; do
  pid=$(cat "$f")
  if kill -0 "$pid" 2>/dev/null; then echo "FAIL: rank process $pid survived"; exit 1; fi
done
echo "ok: collxrun stopped in $elapsed_ms ms"
