// tools/perf_cuda.hpp — the sweep of a GPU benchmark driver, shared by
// collx-perf-cuda (gpu::communicator) and bench's nccl-bench (NCCL), so the
// two print the same table from the same measurement.
//
// Per size, out of place then in place (NCCL's layouts): with -c, one call
// checked against collx-perf's reference and guard bytes (perf_common.hpp);
// the warm-up; then `iters` calls of every rank, timed from the first enqueue
// to the end of the last rank's stream, over iters (or, with graphs, the
// launch of each rank's captured `iters` calls). The last column is the
// device-to-device copy bandwidth of the same bytes on rank 0's GPU, the
// ceiling a run of ranks sharing one GPU is measured against. float32 sum.
//
// A driver says how its ranks' calls are made (gpu_calls): one call of every
// rank (a single thread driving several GPUs must group them, as NCCL's
// ncclGroupStart/End), waiting for every rank's stream (throwing where a
// call failed), optionally capturing one rank's calls into a graph, and which
// variant a size runs (the footer).
#pragma once

#include "perf_common.hpp"

#include <collx/cuda/check.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace collx::perf {

/// One rank's device buffers (on its GPU) and stream.
struct gpu_rank_buffers {
  int device = 0;
  std::byte* send = nullptr;  // the sweep's largest send buffer
  std::byte* recv = nullptr;  // the largest receive buffer and the guard
  cudaStream_t stream = nullptr;
};

/// A call's arguments per rank: (send, recv) as float.
using gpu_call_args = std::vector<std::pair<const float*, float*>>;

/// How a driver's ranks make their calls.
struct gpu_calls {
  /// Enqueue one call of every rank (args[r]) of n elements, `times` times.
  std::function<void(const gpu_call_args& args, std::size_t n, int times)> enqueue;
  /// Wait for every rank's stream; throw where a call failed.
  std::function<void()> wait_all;
  /// Where set (--graph): enqueue `times` calls of rank r alone (captured).
  std::function<void(int r, const gpu_call_args& args, std::size_t n, int times)> enqueue_rank;
  /// Where set: the variant that runs a call of `bytes` (rank 0's buffers args).
  std::function<variant_choice(std::size_t bytes, const gpu_call_args& args, std::size_t n)> variant;
};

/// The start of a GPU driver's usage text: the program, the collectives it
/// runs and the sweep's flags (perf_common.hpp).
inline void print_gpu_usage_head(std::FILE* f, const char* prog) {
  std::fprintf(f,
               "usage: %s <collective> [flags]\n"
               "  collectives: all_reduce, all_gather, reduce_scatter, broadcast, reduce\n%s",
               prog, sweep_flags_help);
}

/// Allocates every rank's buffers for the sweep of o on its device.
inline std::vector<gpu_rank_buffers> gpu_buffers(const options& o, const std::vector<int>& devices) {
  const buffer_bytes need = buffers_for(o, static_cast<int>(devices.size()));
  std::vector<gpu_rank_buffers> b(devices.size());
  for (std::size_t r = 0; r < devices.size(); ++r) {
    b[r].device = devices[r];
    gpu::check(cudaSetDevice(devices[r]), "cudaSetDevice");
    gpu::check(cudaMalloc(&b[r].send, need.send), "cudaMalloc");
    gpu::check(cudaMalloc(&b[r].recv, need.recv), "cudaMalloc");
    gpu::check(cudaStreamCreateWithFlags(&b[r].stream, cudaStreamNonBlocking), "cudaStreamCreate");
  }
  return b;
}

inline void free_gpu_buffers(std::vector<gpu_rank_buffers>& b) {
  for (auto& x : b) {
    (void)cudaSetDevice(x.device);
    (void)cudaFree(x.send), (void)cudaFree(x.recv), (void)cudaStreamDestroy(x.stream);
  }
  b.clear();
}

/// Runs the sweep of o on the ranks' buffers b with the driver's calls, after
/// the header the caller printed; prints the rows and the footer. Returns the
/// exit status: 1 where a value or a guard byte was wrong, else 0.
inline int run_gpu_sweep(const options& o, std::vector<gpu_rank_buffers>& b, const gpu_calls& calls,
                         bool graph) {
  const int P = static_cast<int>(b.size());
  const buffer_bytes need = buffers_for(o, P);
  const data_spec spec = make_spec(o.collective, o.type, o.op, P);
  std::vector<std::byte> hs(need.send), hr(need.recv);
  double busbw_sum = 0;
  long long wrong_total = 0, oob_total = 0;
  std::vector<variant_span> spans;  // which variant ran, per size (the footer)
  std::vector<double> enqueue_us;   // host time to enqueue one rank's call, per timed block
  const std::vector<std::size_t> sizes = sweep_sizes(o);
  for (std::size_t bytes : sizes) {
    const coll_counts k = counts_for(o.collective, bytes, sizeof(float), P);
    const std::size_t n = k.param;
    print_row_start(stdout, bytes, n, "float", op_column(o.collective, o.op),
                    root_column(o.collective, o.root));
    for (bool in_place : {false, true}) {
      std::vector<call_plan> plan(static_cast<std::size_t>(P));
      gpu_call_args args(static_cast<std::size_t>(P));
      for (int r = 0; r < P; ++r) {
        plan[r] = plan_for(k, sizeof(float), r, in_place);
        const std::byte* src = in_place ? b[r].recv + plan[r].send_off : b[r].send;
        args[r] = {reinterpret_cast<const float*>(src),
                   reinterpret_cast<float*>(b[r].recv + plan[r].recv_off)};
      }
      if (!in_place && calls.variant) note_variant(spans, calls.variant(bytes, args, n), bytes);
      long long wrong = -1;
      if (o.check) {
        for (int r = 0; r < P; ++r) {
          prepare_check<float>(spec, k, plan[r], r, o.root, hs.data(), hr.data());
          gpu::check(cudaSetDevice(b[r].device), "cudaSetDevice");
          gpu::check(cudaMemcpy(b[r].send, hs.data(), need.send, cudaMemcpyHostToDevice), "cudaMemcpy");
          gpu::check(cudaMemcpy(b[r].recv, hr.data(), need.recv, cudaMemcpyHostToDevice), "cudaMemcpy");
        }
        calls.enqueue(args, n, 1);
        calls.wait_all();
        wrong = 0;
        for (int r = 0; r < P; ++r) {
          gpu::check(cudaSetDevice(b[r].device), "cudaSetDevice");
          gpu::check(cudaMemcpy(hr.data(), b[r].recv, need.recv, cudaMemcpyDeviceToHost), "cudaMemcpy");
          const auto [w, oob] = check_result<float>(spec, k, plan[r], r, o.root, hr.data());
          wrong += w;
          oob_total += oob;
        }
        wrong_total += wrong;
      }
      calls.enqueue(args, n, o.warmup_iters);
      calls.wait_all();
      double seconds = 0;
      const auto t0 = std::chrono::steady_clock::now();
      if (graph) {
        std::vector<cudaGraphExec_t> ex(static_cast<std::size_t>(P));
        for (int r = 0; r < P; ++r) {
          gpu::check(cudaSetDevice(b[r].device), "cudaSetDevice");
          cudaGraph_t g = nullptr;
          gpu::check(cudaStreamBeginCapture(b[r].stream, cudaStreamCaptureModeThreadLocal), "capture");
          calls.enqueue_rank(r, args, n, o.iters);
          gpu::check(cudaStreamEndCapture(b[r].stream, &g), "end capture");
          gpu::check(cudaGraphInstantiate(&ex[r], g, 0), "instantiate");
          gpu::check(cudaGraphDestroy(g), "graph destroy");
        }
        const auto g0 = std::chrono::steady_clock::now();
        for (int r = 0; r < P; ++r) {
          gpu::check(cudaSetDevice(b[r].device), "cudaSetDevice");
          gpu::check(cudaGraphLaunch(ex[r], b[r].stream), "graph launch");
        }
        calls.wait_all();
        seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - g0).count() / o.iters;
        for (auto x : ex) (void)cudaGraphExecDestroy(x);
      } else {
        calls.enqueue(args, n, o.iters);
        // What the host spends enqueueing one rank's call: bounds the time
        // per call from below where it exceeds the kernels' own time.
        enqueue_us.push_back(
            std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() /
            (static_cast<double>(o.iters) * P));
        calls.wait_all();
        seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / o.iters;
      }
      const auto [alg, bus] = bandwidth(o.collective, n, sizeof(float), seconds, P);
      if (!in_place) busbw_sum += bus;
      print_row_block(stdout, seconds * 1e6, alg, bus, wrong);
    }
    // The ceiling on one GPU: a device-to-device copy of the same bytes.
    // (all_gather's send buffer is smaller than its size: copy what it holds.)
    const std::size_t copied = std::min(bytes, need.send);
    gpu::check(cudaSetDevice(b[0].device), "cudaSetDevice");
    const auto c0 = std::chrono::steady_clock::now();
    for (int t = 0; t < o.iters; ++t)
      gpu::check(cudaMemcpyAsync(b[0].recv, b[0].send, copied, cudaMemcpyDeviceToDevice, b[0].stream),
                 "copy");
    gpu::check(cudaStreamSynchronize(b[0].stream), "sync");
    const double copy_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - c0).count() / o.iters;
    std::printf("  %8.2f\n", copy_s > 0 ? static_cast<double>(copied) / 1e9 / copy_s : 0.0);
    std::fflush(stdout);
  }
  print_footer(stdout, oob_total, sizes.empty() ? 0 : busbw_sum / static_cast<double>(sizes.size()));
  if (calls.variant) std::printf("# variant: %s\n", variants_line(spans).c_str());
  if (!enqueue_us.empty()) {
    std::sort(enqueue_us.begin(), enqueue_us.end());
    std::printf("# host enqueue of one rank's call: median %.2f us, %.2f-%.2f us over the timed blocks\n",
                enqueue_us[enqueue_us.size() / 2], enqueue_us.front(), enqueue_us.back());
  }
  return wrong_total || oob_total ? 1 : 0;
}

}  // namespace collx::perf
