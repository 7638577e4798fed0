#!/bin/bash
# A hierarchical communicator (collx/hier.hpp) on NODES "nodes" × PER_NODE
# ranks of this host: one collxrun --nnodes launcher per node, each with its
# own COLLX_HOSTID (so its ranks form one node: shared memory inside, the
# socket transport over loopback across).
#   hier.sh COLLXRUN HIER_RANK NODES PER_NODE [MODE]
# MODE: check (default), bench, bench_a2a, or kill (the last rank SIGKILLed
# mid-run: every other rank must fail by itself, naming the failure).
set -u
run=$1 bin=$2 nodes=$3 per=$4 mode=${5:-check}
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' \
  2> /dev/null || echo $((20000 + $$ % 20000)))
export COLLX_SOCKET_IFNAME=lo COLLX_TIMEOUT=${COLLX_TIMEOUT:-30}
export COLLX_SECRET=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
work=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill -9 "$p" 2> /dev/null; done; rm -rf "$work"' EXIT
args=("$mode")
[ "$mode" = kill ] && args+=("$work")
for ((k = 0; k < nodes; k++)); do
  COLLX_HOSTID="node$k" "$run" --timeout 600 --nnodes "$nodes" --node-rank "$k" --master "127.0.0.1:$port" \
    -n "$per" "$bin" "${args[@]}" > "$work/n$k" 2>&1 &
  pids+=($!)
done
if [ "$mode" = kill ]; then
  # The last rank is SIGKILLed once every rank runs; every other rank must
  # fail by itself within 5 s (collxrun would end them after 2 s of grace:
  # so they must report before that), naming what failed.
  last=$((nodes * per - 1))
  for _ in $(seq 400); do [ "$(ls "$work"/pid.* 2> /dev/null | wc -l)" -eq $((last + 1)) ] && break; sleep 0.05; done
  [ -e "$work/pid.$last" ] || { echo "FAIL: the ranks never ran"; cat "$work"/n*; exit 1; }
  kill -9 "$(cat "$work/pid.$last")"
  for p in "${pids[@]}"; do wait "$p"; done
  pids=()
  cat "$work"/n*
  rc=0
  for ((r = 0; r < last; r++)); do
    grep -q "^\[$r\] rank $r: FAILED_AS_EXPECTED" "$work"/n* || { echo "FAIL: rank $r did not fail by itself"; rc=1; }
  done
  exit $rc
fi
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=1; done
pids=()
for ((k = 0; k < nodes; k++)); do cat "$work/n$k"; done
if [[ $mode == check ]]; then
  for ((r = 0; r < nodes * per; r++)); do
    grep -q "^\[$r\] rank $r: PASS: $nodes nodes x $per ranks" "$work"/n* || { echo "FAIL: no PASS from rank $r"; rc=1; }
  done
fi
exit $rc
