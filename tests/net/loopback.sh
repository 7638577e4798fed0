#!/bin/bash
# P ranks of tests/net/net_rank on this host's loopback (socket transport):
#   loopback.sh NET_RANK P MODE
set -u
bin=$1 P=$2 mode=$3
# A port the kernel says is free now (another job may still take it first: rare).
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' \
  2> /dev/null || echo $((20000 + $$ % 20000)))
export COLLX_SIZE=$P COLLX_ROOT_ADDR=127.0.0.1:$port COLLX_SOCKET_IFNAME=lo COLLX_TIMEOUT=${COLLX_TIMEOUT:-15}
export COLLX_SECRET=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
work=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill -9 "$p" 2> /dev/null; done; rm -rf "$work"' EXIT
for ((r = 0; r < P; r++)); do
  COLLX_RANK=$r "$bin" "$mode" > "$work/r$r" 2>&1 &
  pids+=($!)
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=1; done
pids=()
for ((r = 0; r < P; r++)); do cat "$work/r$r"; done
exit $rc
