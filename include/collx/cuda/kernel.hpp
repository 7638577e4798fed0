// collx/cuda/kernel.hpp — the kernel a CUDA communicator launches: one call
// of one rank, as S blocks, block s running stripe s (collx/stripes.hpp).
//
// The schedule, primitives and protocol code are the ones CPU ranks run;
// only the executor (exec::cuda: a block is the worker group) differs. Every
// wait is bounded by ex.timeout_ns from the block's first wait and watches
// ex.abort_word. A block that fails stores its status into *status_word once
// (the first failure of the rank wins); the host reads it asynchronously
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

template <class Algo, class Proto, coll C, class T, reduce_op Op>
__global__ void __launch_bounds__(block_threads)
    collective_kernel(transport::mesh_view view, exec::cuda ex, schedule_args<T> a, int* status_word) {
  const reducer<T, Op> red{static_cast<std::uint32_t>(a.nranks)};
  const int stripe = static_cast<int>(blockIdx.x), nstripes = static_cast<int>(gridDim.x);
  const status st = run_stripe<Algo, Proto, C>(ex, view, red, proto::channel_of<Proto>, a, stripe, nstripes);
  if (threadIdx.x == 0 && st != status::ok) atomicCAS(status_word, 0, static_cast<int>(st));
}

}  // namespace collx::gpu

#endif  // __CUDACC__
