#!/bin/bash
# collxrun across "nodes" on this host's loopback, torchrun-style: NODES
# launchers, each `collxrun --nnodes NODES --node-rank K --master
# 127.0.0.1:PORT -n PER_NODE NET_RANK check` (socket transport), then the
# launcher's refusals of bad multi-node arguments.
#   multinode.sh COLLXRUN NET_RANK NODES PER_NODE
set -u
run=$1 bin=$2 nodes=$3 per=$4
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' \
  2> /dev/null || echo $((20000 + $$ % 20000)))
export COLLX_SOCKET_IFNAME=lo COLLX_TIMEOUT=${COLLX_TIMEOUT:-20}
export COLLX_SECRET=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
work=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill -9 "$p" 2> /dev/null; done; rm -rf "$work"' EXIT
for ((k = 0; k < nodes; k++)); do
  # Each launcher plays a node of its own (COLLX_HOSTID): its ranks share
  # memory, and reach the other nodes' over TCP.
  COLLX_HOSTID="node$k" "$run" --timeout 120 --nnodes "$nodes" --node-rank "$k" --master "127.0.0.1:$port" \
    -n "$per" "$bin" check > "$work/n$k" 2>&1 &
  pids+=($!)
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=1; done
pids=()
for ((k = 0; k < nodes; k++)); do cat "$work/n$k"; done
total=$((nodes * per))
# Every global rank ran the matrix and passed, each under its global number.
for ((r = 0; r < total; r++)); do
  if ! cat "$work"/n* | grep -q "^\[$r\] rank $r: PASS: .*; $((per - 1)) peer(s) through memory"; then
    echo "FAIL: no PASS line from global rank $r with its node's $((per - 1)) other rank(s) through memory"
    rc=1
  fi
done
# Refusals: no secret, a node rank out of range, no master.
refused() {
  local want=$1
  shift
  local out
  out=$("$@" 2>&1)
  local code=$?
  if [[ $code -ne 2 || "$out" != *"$want"* ]]; then
    echo "FAIL: '$*' gave $code: $out (expected exit 2 with '$want')"
    rc=1
  fi
}
refused "COLLX_SECRET" env -u COLLX_SECRET "$run" --nnodes 2 --node-rank 0 --master 127.0.0.1:1 -n 1 true
refused "not below --nnodes" "$run" --nnodes 2 --node-rank 2 --master 127.0.0.1:1 -n 1 true
refused "needs --master" "$run" --nnodes 2 --node-rank 1 -n 1 true
refused "ADDR:PORT" "$run" --nnodes 2 --node-rank 1 --master 127.0.0.1 -n 1 true
exit $rc
