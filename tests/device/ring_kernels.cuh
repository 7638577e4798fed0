// Kernels that run the ring schedules with a protocol (Simple, LL, LL128) on a GPU: each
// thread block is one rank, all ranks share one segment laid out exactly as
// the host shm transport lays it out.
#pragma once

#include <collx/algo/ring.hpp>
#include <collx/exec/cuda.hpp>
#include <collx/prims.hpp>
#include <collx/proto/ll.hpp>
#include <collx/proto/ll128.hpp>
#include <collx/proto/simple.hpp>
#include <collx/reduce_op.hpp>
#include <collx/transport/shm.hpp>

namespace collx::test {

template <class Proto, coll C, class T, reduce_op Op>
__global__ void ring_kernel(transport::shm_view view, exec::cuda ex, const T* const* send, T* const* recv,
                            std::size_t count, int root, int* status_out, std::uint64_t timeout_ns) {
  const int rank = static_cast<int>(blockIdx.x);
  ex.deadline_ns = exec::globaltimer_ns() + timeout_ns;  // every wait of this launch is bounded
  reducer<T, Op> red{static_cast<std::uint32_t>(view.nranks())};
  prims<Proto, exec::cuda, transport::shm_view, T, reducer<T, Op>> p(ex, view, rank, red);
  schedule_args<T> a{send[rank], recv[rank], count, root, rank, view.nranks()};
  const status st = algo::ring::run<C>(p, a);
  if (threadIdx.x == 0) status_out[rank] = static_cast<int>(st);
}

}  // namespace collx::test
