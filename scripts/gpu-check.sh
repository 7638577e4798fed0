#!/usr/bin/env bash
# scripts/gpu-check.sh OUT [BUILD] — the GPU checks, on a machine with a GPU,
# from a build folder made beforehand (no compiling here: GPU time is for
# running). BUILD defaults to build/cuda (the `cuda` preset, built with
# `cmake --workflow --preset cuda` or `cmake --build --preset cuda`).
#
# Writes into OUT:
#   summary.md            one line per step: PASS / FAIL / SKIP, its time
#   nvidia-smi.txt        the GPU, driver and clocks
#   ptx-check.log         tests/device/check_ptx.py on the instantiation check's PTX
#   ring.log              the GPU ring test (P ranks of S blocks in one kernel)
#   lowp.log              half, bfloat16 and fp8 through the GPU's cvt and packed
#                         instructions against the host's bits (gpu_lowp_test)
#   lowp-comm.log         half and bfloat16 all_reduce through gpu::communicator,
#                         bit for bit against the host reducer (gpu_lowp_comm_test)
#   register.log          registered user buffers: nvls's single copy in place,
#                         every collective, 2-4 ranks, and its time per call
#                         beside staged nvls and the ring (gpu_register_test)
#   register-procs.log    the same collectives on two processes (CUDA IPC handles)
#   multicast.log         nvls through an NVSwitch multicast object: the
#                         refusals, then every type the switch reduces on 2..N
#                         GPUs and the time per call beside nvls over the
#                         peers and the ring (SKIP where no GPUs offer it)
#   multicast-procs.log   the same cases on two process ranks, one GPU each
#   perf-*.log            collx-perf-cuda sweeps (nccl-tests columns, last column
#                         the device-to-device copy bandwidth of the same bytes)
#   nccl-ar-p<G>.log, perf-ar-p<G>-gpus.log  on G >= 2 GPUs: NCCL's all_reduce
#                         (nccl-bench) and collx's automatic choice, one rank
#                         per GPU, 8 B-256 MiB, the same table
#   host-misuse.log       the host communicator given cudaMalloc'd buffers:
#                         refused with a clear error
#   comm-procs.log        gpu::from_env on two processes sharing the GPU
#   comm-procs-{cuda_ipc,fabric}.log  the same with the regions shared by
#                         CUDA IPC handles, by fabric handles (SKIP where refused)
#   comm-procs-host.log   the same with the FIFO regions in a shared segment
#                         registered as mapped host memory (the fallback for
#                         GPUs without peer access, forced)
#   comm.log              gpu::communicator: every collective, graph replays,
#                         abort, deadline, misuse (P ranks sharing the GPU),
#                         and the same over host-memory regions
#   comm-each.log         the same with COLLX_GPU_FENCE=each (a system fence in
#                         every thread before a post, the former default)
#   comm-sys.log          the same with COLLX_GPU_SCOPE=system (steps ordered
#                         at system scope, as groups across GPUs order them)
#   perf-ar-p2-simple-small-{sys,gpu}.log  small Simple calls at both scopes
#   perf-ar-p*-nvls-{registered,staged}.log  nvls with registered buffers (read
#                         in place) against nvls staging them, 8 B-4 MiB
#   perf-ar-p2-sweep-*.log  every explicit variant and the automatic choice,
#                         8 B-64 MiB; variants-report.md holds them side by side
#   nsys-*.log            nsys's summary of a small-call sweep, where nsys is
#                         installed (kernel time against the runtime API's)
#   sanitizer-<tool>.log  compute-sanitizer memcheck, racecheck, synccheck on
#                         the GPU ring test (small: the sanitizers are slow)
# Exits non-zero if any step failed; a step whose tool is missing is SKIP.
# Every step is bounded by COLLX_GPU_STEP_TIMEOUT seconds (default 150).
# Run from the repository root. With the device tool, which carries at most
# 64 MiB and brings back at most 8 files: build here first, pack what runs
# with scripts/gpu-bundle.sh, then
#   run(command='COLLX_GPU_STEP_TIMEOUT=150 timeout 480 scripts/gpu-check.sh "$OUT/r" build/gpu-bundle;
#                cp "$OUT/r/summary.md" "$OUT"; tar czf "$OUT/gpu-check.tgz" -C "$OUT" r && rm -rf "$OUT/r"',
#       carry=["build/gpu-bundle"], timeout_s=540)
# (the whole script took 158 s on an H200 at fa769e7, before the second
# communicator test, the variant sweeps and nsys were added)
# and record what it printed in bench/results/gpu-*.md.
#
# Not here yet: the NVLink path's multi-GPU matrix; it adds its steps where
# such a machine exists. The two multicast steps and NCCL beside
# collx-perf-cuda are the exceptions: they are here, and SKIP on a machine
# with one GPU (the multicast steps also without multicast).
set -u
out=${1:?usage: scripts/gpu-check.sh OUT [BUILD]}
build=${2:-build/cuda}
mkdir -p "$out"
summary="$out/summary.md"
: >"$summary"
failed=0

# Each step is bounded (GPU time is scarce and a hang must not eat it):
# COLLX_GPU_STEP_TIMEOUT seconds (default 150); output line-buffered so that a
# step killed by the timeout still leaves what it printed.
step_timeout=${COLLX_GPU_STEP_TIMEOUT:-150}
# COLLX_GPU_QUICK=1: correctness and the small-call and 256 MiB numbers only
# (about 2 minutes on an H200), for a session with little GPU time left.
quick=${COLLX_GPU_QUICK:-}
step() {  # step NAME LOG CMD...: runs CMD with its output in LOG, records the outcome
  local name=$1 log=$2
  shift 2
  local t0=$SECONDS rc
  timeout -k 5 "$step_timeout" stdbuf -oL -eL "$@" >"$log" 2>&1
  rc=$?
  local dt=$((SECONDS - t0)) word=PASS
  if [ $rc -eq 77 ]; then word=SKIP
  elif [ $rc -eq 124 ] || [ $rc -eq 137 ]; then word="FAIL (timed out after ${step_timeout} s)"; failed=1
  elif [ $rc -ne 0 ]; then word=FAIL; failed=1; fi
  echo "| $name | $word (exit $rc) | ${dt} s | \`$(basename "$log")\` |" >>"$summary"
  echo "$word  $name [${dt} s]"
}
built_step() {  # built_step NAME LOG BINARY ARGS...: step, or FAIL where the build lacks BINARY
  local name=$1 log=$2 bin=$3
  shift 3
  if [ -x "$bin" ]; then
    step "$name" "$log" "$bin" "$@"
  else
    echo "| $name | FAIL ($bin missing) | | |" >>"$summary"
    failed=1
  fi
}

echo "| step | result | time | log |" >>"$summary"
echo "|---|---|---|---|" >>"$summary"

if command -v nvidia-smi >/dev/null; then
  step "nvidia-smi" "$out/nvidia-smi.txt" nvidia-smi -q
else
  echo "| nvidia-smi | SKIP (not installed) | | |" >>"$summary"
fi

ring=$build/tests/device/collx_gpu_ring_test
if [ ! -x "$ring" ]; then
  echo "gpu-check: $ring not found: build the cuda preset first (cmake --workflow --preset cuda)" >&2
  echo "| build | FAIL ($ring missing) | | |" >>"$summary"
  exit 1
fi

# Run directly, not through ctest: the build folder may have been carried to
# another machine, where the absolute paths ctest recorded do not exist.
[ -z "$quick" ] && step "PTX check" "$out/ptx-check.log" \
  python3 tests/device/check_ptx.py "$build"/tests/device/CMakeFiles/collx_device_instantiate.dir/*.ptx*
step "GPU ring test" "$out/ring.log" env COLLX_GPU_TIMEOUT_MS=5000 "$ring"
built_step "narrow floats on the GPU against the host" "$out/lowp.log" "$build/tests/device/collx_gpu_lowp_test"
built_step "half and bfloat16 all_reduce against the host" "$out/lowp-comm.log" \
  "$build/tests/device/collx_gpu_lowp_comm_test"
built_step "registered user buffers (nvls single copy)" "$out/register.log" \
  "$build/tests/device/collx_gpu_register_test"
built_step "registered user buffers, process ranks (CUDA IPC)" "$out/register-procs.log" \
  "$build/tools/collxrun" -n 2 "$build/tests/device/collx_gpu_register_test" --procs
built_step "nvls through a multicast object" "$out/multicast.log" "$build/tests/device/collx_gpu_multicast_test"
built_step "nvls through a multicast object, process ranks" "$out/multicast-procs.log" \
  "$build/tools/collxrun" -n 2 "$build/tests/device/collx_gpu_multicast_test" --procs
built_step "host communicator refuses GPU memory" "$out/host-misuse.log" "$build/tests/device/collx_gpu_host_misuse"
comm=$build/tests/device/collx_gpu_comm_test
if [ -x "$comm" ]; then
  step "CUDA communicator test" "$out/comm.log" "$comm"
  [ -z "$quick" ] && step "CUDA communicator test, fences in every thread" "$out/comm-each.log" \
    env COLLX_GPU_FENCE=each "$comm"
  [ -z "$quick" ] && step "CUDA communicator test, system scope" "$out/comm-sys.log" \
    env COLLX_GPU_SCOPE=system "$comm"
  step "CUDA communicator, process ranks" "$out/comm-procs.log" "$build/tools/collxrun" -n 2 "$comm" --procs
  step "CUDA communicator, process ranks, host regions" "$out/comm-procs-host.log" "$build/tools/collxrun" -n 2 \
    "$comm" --procs --host-regions
  # The other two ways of sharing device regions (comm-procs.log names the
  # one the automatic choice took); fabric skips (77) where the driver
  # refuses it on every rank, e.g. without an IMEX channel.
  for way in cuda_ipc fabric; do
    step "CUDA communicator, process ranks, regions by $way handles" "$out/comm-procs-$way.log" \
      "$build/tools/collxrun" -n 2 "$comm" --procs --handle $way
  done
else
  echo "| CUDA communicator test | FAIL ($comm missing) | | |" >>"$summary"
  failed=1
fi

# The perf sweep (issue quality bar: 256 MiB Simple all_reduce against the
# device-to-device copy, 8 B LL latency per call and inside a graph).
perf=$build/tools/collx-perf-cuda
if [ -x "$perf" ]; then
  # Small calls, and the A/B of the per-step fences: every thread fencing
  # before a post (COLLX_GPU_FENCE=each) against the leader's release alone
  # (the default: exec::cuda::fence_each_thread off).
  fences="each leader"
  [ -n "$quick" ] && fences=leader
  for fence in $fences; do
    sfx=""
    [ "$fence" = leader ] && sfx="-leader"
    step "perf all_reduce P=2 ring/ll, $fence fences" "$out/perf-ar-p2-ll$sfx.log" env COLLX_GPU_FENCE=$fence \
      "$perf" all_reduce -b 8 -e 64K -f 8 -p 2 -n 200 --algo ring --proto ll
    step "perf all_reduce P=2 ring/ll graph, $fence fences" "$out/perf-ar-p2-ll-graph$sfx.log" \
      env COLLX_GPU_FENCE=$fence "$perf" all_reduce -b 8 -e 64K -f 8 -p 2 -n 200 --algo ring --proto ll --graph
    step "perf all_reduce P=2 ring/simple, $fence fences" "$out/perf-ar-p2-simple$sfx.log" \
      env COLLX_GPU_FENCE=$fence "$perf" all_reduce -b 1M -e 256M -f 4 -p 2 --algo ring --proto simple
  done
  # Steps ordered at GPU scope (the default for ranks sharing this GPU)
  # against system scope, small calls where the fences weigh most.
  step "perf all_reduce P=2 ring/simple 8 B-64 KiB, system scope" "$out/perf-ar-p2-simple-small-sys.log" \
    env COLLX_GPU_SCOPE=system "$perf" all_reduce -b 8 -e 64K -f 8 -p 2 -n 200 --algo ring --proto simple
  step "perf all_reduce P=2 ring/simple 8 B-64 KiB, GPU scope" "$out/perf-ar-p2-simple-small-gpu.log" \
    "$perf" all_reduce -b 8 -e 64K -f 8 -p 2 -n 200 --algo ring --proto simple
  # The launch floor (one rank, nothing to wait for).
  step "perf all_reduce P=1 ring/ll 8 B (launch floor)" "$out/perf-ar-p1-ll.log" "$perf" all_reduce -b 8 -e 8 -p 1 \
    -n 200 --algo ring --proto ll
  if [ -z "$quick" ]; then
    # Every explicit variant over the automatic choice's range, so that its
    # pick can be held against the fastest measured (bench/gpu_variants_report.py).
    for v in ring/simple ring/ll ring/ll128 tree/simple tree/ll tree/ll128; do
      step "perf all_reduce P=2 $v sweep" "$out/perf-ar-p2-sweep-${v/\//-}.log" "$perf" all_reduce -b 8 -e 64M -f 8 \
        -p 2 --algo "${v%/*}" --proto "${v#*/}"
    done
    step "perf all_reduce P=2 auto sweep" "$out/perf-ar-p2-sweep-auto.log" "$perf" all_reduce -b 8 -e 64M -f 8 -p 2
    # Registered buffers (nvls reads peers' buffers in place, on every block) against
    # nvls staging them, 8 B to 64 MiB, 2 and 4 ranks.
    for p in 2 4; do
      step "perf all_reduce P=$p nvls registered" "$out/perf-ar-p$p-nvls-registered.log" "$perf" all_reduce -b 8 \
        -e 64M -f 4 -p $p -n 100 --algo nvls --proto simple --register
      step "perf all_reduce P=$p nvls staged" "$out/perf-ar-p$p-nvls-staged.log" "$perf" all_reduce -b 8 -e 64M -f 4 \
        -p $p -n 100 --algo nvls --proto simple
    done
    step "automatic choice against the variants" "$out/variants-report.md" python3 bench/gpu_variants_report.py "$out"
    # More ranks on the GPU, and fewer stripes than the default.
    step "perf all_reduce P=4 auto" "$out/perf-ar-p4.log" "$perf" all_reduce -b 8 -e 256M -f 4 -p 4
    step "perf all_reduce P=8 auto" "$out/perf-ar-p8.log" "$perf" all_reduce -b 8 -e 64M -f 8 -p 8
    step "perf all_reduce P=2 ring/ll stripes 1" "$out/perf-ar-p2-ll-s1.log" "$perf" all_reduce -b 8 -e 64K -f 8 -p 2 \
      -n 200 --algo ring --proto ll --stripes 1
    for s in 4 16; do
      step "perf all_reduce P=2 ring/simple stripes $s" "$out/perf-ar-p2-simple-s$s.log" "$perf" all_reduce -b 4M \
        -e 256M -f 4 -p 2 --algo ring --proto simple --stripes $s
    done
    # Where a small call's time goes: kernel durations against the API's.
    nsys=""
    for s in nsys /usr/local/cuda/bin/nsys; do
      if command -v "$s" >/dev/null; then nsys=$(command -v "$s"); break; fi
    done
    if [ -n "$nsys" ]; then
      step "nsys: P=2 ring/ll 8 B" "$out/nsys-ar-p2-ll.log" "$nsys" profile --stats=true -o "$out/nsys-ar-p2-ll" \
        --force-overwrite true "$perf" all_reduce -b 8 -e 8 -p 2 -n 200 --algo ring --proto ll
      rm -f "$out"/nsys-ar-p2-ll.nsys-rep "$out"/nsys-ar-p2-ll.sqlite
    else
      echo "| nsys | SKIP (not installed) | | |" >>"$summary"
    fi
  fi
else
  echo "| perf | FAIL ($perf missing) | | |" >>"$summary"
  failed=1
fi

# Several GPUs: NCCL beside collx on the same GPUs, one rank per GPU
# (nccl-bench and collx-perf-cuda print the same table: tools/perf_cuda.hpp).
gpus=0
command -v nvidia-smi >/dev/null && gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
nccl=$build/bench/nccl-bench
if [ "$gpus" -ge 2 ] && [ -x "$perf" ]; then
  if [ -x "$nccl" ]; then
    step "nccl-bench all_reduce on $gpus GPUs" "$out/nccl-ar-p$gpus.log" "$nccl" all_reduce -b 8 -e 256M -f 4 -p "$gpus"
  else
    echo "| nccl-bench | SKIP (not built: the toolkit has no nccl.h) | | |" >>"$summary"
  fi
  step "perf all_reduce on $gpus GPUs auto" "$out/perf-ar-p$gpus-gpus.log" "$perf" all_reduce -b 8 -e 256M -f 4 \
    -p "$gpus" --gpus "$gpus"
else
  echo "| NCCL beside collx on several GPUs | SKIP ($gpus GPUs) | | |" >>"$summary"
fi

sanitizer=""
for s in compute-sanitizer /usr/local/cuda/bin/compute-sanitizer; do
  if command -v "$s" >/dev/null; then sanitizer=$(command -v "$s"); break; fi
done
for tool in memcheck racecheck synccheck; do
  if [ -z "$sanitizer" ]; then
    echo "| compute-sanitizer $tool | SKIP (not installed) | | |" >>"$summary"
    continue
  fi
  # Generous per-kernel budget: the sanitizers slow kernels by 10-100x.
  step "compute-sanitizer $tool" "$out/sanitizer-$tool.log" \
    env COLLX_GPU_TIMEOUT_MS=60000 COLLX_GPU_SMALL=1 "$sanitizer" --tool "$tool" --error-exitcode 3 "$ring"
done

cat "$summary"
exit $failed
