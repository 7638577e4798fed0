#!/bin/sh
# Starts N ranks with torchrun's variables (no collx variables, no unique id)
# and fails if any rank fails: checks the environment path of from_env.
# usage: torchrun_env.sh N PORT program [args...]
set -u
n=$1 port=$2
shift 2
pids=""
r=0
while [ "$r" -lt "$n" ]; do
  env -u COLLX_RANK -u COLLX_SIZE -u COLLX_UNIQUE_ID RANK=$r WORLD_SIZE=$n LOCAL_RANK=$r LOCAL_WORLD_SIZE=$n \
    MASTER_ADDR=127.0.0.1 MASTER_PORT=$port "$@" &
  pids="$pids $!"
  r=$((r + 1))
done
rc=0
for p in $pids; do
  wait "$p" || rc=1
done
exit $rc
