#!/bin/bash
# A hierarchical communicator (collx/hier.hpp) on NODES "nodes" × PER_NODE
# ranks of this host: one collxrun --nnodes launcher per node, each with its
# own COLLX_HOSTID (so its ranks form one node: shared memory inside, the
# socket transport over loopback across).
#   hier.sh COLLXRUN HIER_RANK NODES PER_NODE [MODE]
set -u
run=$1 bin=$2 nodes=$3 per=$4 mode=${5:-check}
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' \
  2> /dev/null || echo $((20000 + $$ % 20000)))
export COLLX_SOCKET_IFNAME=lo COLLX_TIMEOUT=${COLLX_TIMEOUT:-30}
export COLLX_SECRET=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
work=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill -9 "$p" 2> /dev/null; done; rm -rf "$work"' EXIT
for ((k = 0; k < nodes; k++)); do
  COLLX_HOSTID="node$k" "$run" --timeout 600 --nnodes "$nodes" --node-rank "$k" --master "127.0.0.1:$port" \
    -n "$per" "$bin" "$mode" > "$work/n$k" 2>&1 &
  pids+=($!)
done
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
