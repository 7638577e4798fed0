#!/bin/bash
# P ranks of tests/net/net_rank on this host's loopback (socket transport):
#   loopback.sh NET_RANK P MODE [PATH]
# PATH: network (default; COLLX_NET_SHM=0, every step over TCP) or memory
# (the ranks share this host's memory, no step over the network); in check
# mode every rank's PASS line must say so.
set -u
bin=$1 P=$2 mode=$3 path=${4:-network}
case $path in
  network) export COLLX_NET_SHM=0 want="0 peer(s) through memory, [1-9][0-9]* step(s)" ;;
  memory) export COLLX_NET_SHM=1 want="$((P - 1)) peer(s) through memory, 0 step(s)" ;;
  *) echo "loopback.sh: PATH must be network or memory, not '$path'" >&2; exit 2 ;;
esac
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
for ((r = 0; r < P; r++)); do
  cat "$work/r$r"
  if [ "$mode" = check ] && ! grep -q "^rank $r: PASS: .*; $want over the network" "$work/r$r"; then
    echo "FAIL: rank $r did not pass with steps through $path"
    rc=1
  fi
done
exit $rc
