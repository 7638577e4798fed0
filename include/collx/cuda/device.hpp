// collx/cuda/device.hpp — the device door: a whole collective inside the
// caller's own kernel, fused with the compute around it.
//
//   const gpu::device_comm h = comm.device_handle();   // host, once
//   my_kernel<<<h.stripes, gpu::block_threads, 0, stream>>>(h, ...);
//
//   __global__ void my_kernel(const __grid_constant__ gpu::device_comm h, const float* x, float* y,
//                             std::size_t n) {
//     const stripe_slice s = h.slice_of_block(n, sizeof(float));   // this block's elements
//     for (i in s) y[i] = f(x[i]);                                 // produce them
//     __syncthreads();                                             // the block's slice is ready
//     h.all_reduce<algo::ring, proto::ll>(y, y, n);                // every block: its stripe
//   }
//
// Block b of the caller's grid runs stripe b of the call (collx/stripes.hpp):
// it moves exactly the elements slice_of_block() names, so a block only has
// to have produced its own slice before it calls, and needs no grid-wide
// barrier. The grid must have h.stripes blocks of block_threads threads (a
// different shape returns status::invalid_argument), and every rank of the
// group must run the same calls in the same order, interleaved in stream
// order with the host API's calls (they share the FIFOs' step counters).
// A failure is returned to the calling block and stored in the rank's status
// word, where communicator::error() and wait() find it; unless it was an
// abort, it also raises the group's abort word, so every other rank's waits
// end with status::aborted at once.
//
// The handle is trivially copyable: pass it by value as a kernel argument,
// declared `const __grid_constant__` (sm_70 and later), so that the calls
// read it where the launch put it; otherwise each thread copies its 800-odd
// bytes into local memory.
#pragma once

#include <collx/coll.hpp>
#include <collx/cuda/kernel.hpp>
#include <collx/exec/cuda.hpp>
#include <collx/proto/list.hpp>
#include <collx/reduce_op.hpp>
#include <collx/stripes.hpp>
#include <collx/transport/mesh.hpp>

#include <cstddef>
#include <type_traits>

#if defined(__CUDACC__)

namespace collx::gpu {

struct device_comm {
  transport::mesh_view view{};
  exec::cuda exec{};
  int rank = 0;
  int nranks = 1;
  int stripes = 1;
  int* status_word = nullptr;

  /// The elements of a count-element buffer (of every block, for blocked
  /// collectives) that this block's stripe moves.
  __device__ stripe_slice slice_of_block(std::size_t count, std::size_t elem_bytes) const {
    return slice_of_stripe(count, elem_bytes, static_cast<int>(blockIdx.x), stripes);
  }

  /// Collective C with <Algo, Proto> on this rank; every thread of every
  /// block of the grid calls it. Arguments as the host API's.
  template <class Algo, class Proto, coll C, class T, reduce_op Op = reduce_op::sum>
  __device__ status run(const T* send, T* recv, std::size_t count, int root = 0) const {
    status st = status::invalid_argument;
    if (static_cast<int>(gridDim.x) == stripes && blockDim.x == static_cast<unsigned>(block_threads)) {
      const reducer<T, Op> red{static_cast<std::uint32_t>(nranks)};
      const schedule_args<T> a{send, recv, count, root, rank, nranks};
      st = run_stripe<Algo, Proto, C>(exec, view, red, proto::channel_of<Proto>, a,
                                      static_cast<int>(blockIdx.x), stripes);
    }
    report_failure(st, status_word, view.abort_word());
    return st;
  }
  template <class Algo, class Proto, class T, reduce_op Op = reduce_op::sum>
  __device__ status all_reduce(const T* send, T* recv, std::size_t count) const {
    return run<Algo, Proto, coll::all_reduce, T, Op>(send, recv, count);
  }
  template <class Algo, class Proto, class T>
  __device__ status all_gather(const T* send, T* recv, std::size_t sendcount) const {
    return run<Algo, Proto, coll::all_gather, T>(send, recv, sendcount);
  }
  template <class Algo, class Proto, class T, reduce_op Op = reduce_op::sum>
  __device__ status reduce_scatter(const T* send, T* recv, std::size_t recvcount) const {
    return run<Algo, Proto, coll::reduce_scatter, T, Op>(send, recv, recvcount);
  }
};
static_assert(std::is_trivially_copyable_v<device_comm>, "a device handle is passed to kernels by value");

}  // namespace collx::gpu

#endif  // __CUDACC__
