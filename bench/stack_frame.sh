#!/usr/bin/env bash
# bench/stack_frame.sh REV [ARCH] — ptxas's stack frame, spills and registers
# of gpu::collective_kernel for six variants (bench/stack_frame_kernels.cu),
# compiled against the headers of git revision REV and against the working
# tree's, for sm_ARCH (default 90). The stack frame is local memory the GPU
# reserves for every thread it can hold. No GPU needed: what the compiler
# emits, not a timing.
usage="bench/stack_frame.sh REV [ARCH]"
source "$(dirname "${BASH_SOURCE[0]}")/rev_headers.sh"
for side in "$rev:$tmp/include" "working tree:include"; do
  echo "== ${side%%:*}"
  "$nvcc" -std=c++20 -I"${side#*:}" -arch=sm_"$arch" -Xptxas -v \
    -c bench/stack_frame_kernels.cu -o "$tmp/k.o" 2>&1 |
    awk 'function part(re, skip,  p) {  # the match of re less its first skip characters and leading digits
           p = match($0, re) ? substr($0, RSTART + skip, RLENGTH - skip) : "?"
           sub(/^[0-9]+(basic_)?/, "", p)
           return p
         }
         BEGIN { split("all_reduce all_gather reduce_scatter broadcast reduce all_to_all", colls, " ") }
         /Compiling entry/ { name = part("algo[0-9]+[a-z_]+", 4) "/" part("proto[0-9]+[a-z0-9]+", 5) " " \
                             colls[(match($0, /collE[0-9]/) ? substr($0, RSTART + 5, 1) : 9) + 1] }
         /stack frame/ { frame = $1; spill_st = $5; spill_ld = $9 }
         /Used [0-9]+ registers/ { print name, "stack", frame, "B, spills", spill_st "/" spill_ld, "B, registers", $5 }'
done
