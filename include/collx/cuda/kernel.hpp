// collx/cuda/kernel.hpp — the kernel a CUDA communicator launches: one call
// of one rank, as S blocks, block s running stripe s (collx/stripes.hpp).
//
// The schedule, primitives and protocol code are the ones CPU ranks run;
// only the executor (exec::cuda: a block is the worker group) differs. Every
// wait is bounded by ex.timeout_ns from the block's first wait and watches
// ex.abort_word. A block that fails stores its status into *status_word once
// (the first failure of the rank wins) and raises the group's abort word
// (report_failure); the host reads both asynchronously
// (gpu::communicator::error()). Needs nvcc.
#pragma once

#include <collx/coll.hpp>
#include <collx/exec/cuda.hpp>
#include <collx/proto/list.hpp>
#include <collx/reduce_op.hpp>
#include <collx/stripes.hpp>
#include <collx/transport/mesh.hpp>

#if defined(__CUDACC__)

namespace collx::gpu {

/// Threads per block the communicator launches with: whole warps, LL128's
/// 8-lane teams complete, and few enough registers that several ranks'
/// blocks fit on one SM.
inline constexpr int block_threads = 256;

/// A block's failure (thread 0 reports): the status into the rank's word,
/// the rank's first failure winning, and, unless the failure was itself an
/// abort, the group's abort word raised, so that the peers' kernels stop
/// waiting for this rank at once instead of at their deadlines (a failed call
/// leaves the connections undefined: the group is done either way).
__device__ inline void report_failure(status st, int* status_word, std::uint32_t* abort_word) {
  if (threadIdx.x != 0 || st == status::ok) return;
  if (status_word != nullptr) atomicCAS(status_word, 0, static_cast<int>(st));
  if (st != status::aborted && abort_word != nullptr) {
    __threadfence_system();  // the status before the word, for a host that reads both
    atomicExch(abort_word, 1u);
  }
}

template <class Algo, class Proto, coll C, class T, reduce_op Op>
__global__ void __launch_bounds__(block_threads)
    collective_kernel(const __grid_constant__ transport::mesh_view view, exec::cuda ex, schedule_args<T> a,
                      int* status_word) {
  const reducer<T, Op> red{static_cast<std::uint32_t>(a.nranks)};
  const int stripe = static_cast<int>(blockIdx.x), nstripes = static_cast<int>(gridDim.x);
  const status st = run_stripe<Algo, Proto, C>(ex, view, red, proto::channel_of<Proto>, a, stripe, nstripes);
  report_failure(st, status_word, view.abort_word());
}

}  // namespace collx::gpu

#endif  // __CUDACC__
