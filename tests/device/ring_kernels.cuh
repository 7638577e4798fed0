// Kernels that run the ring schedules with a protocol (Simple, LL, LL128) on a GPU: each
// rank is S thread blocks, one per stripe (collx/stripes.hpp), all ranks share
// one segment laid out exactly as the host shm transport lays it out.
#pragma once

#include <collx/algo/ring.hpp>
#include <collx/exec/cuda.hpp>
#include <collx/prims.hpp>
#include <collx/proto/ll.hpp>
#include <collx/proto/ll128.hpp>
#include <collx/proto/simple.hpp>
#include <collx/reduce_op.hpp>
#include <collx/stripes.hpp>
#include <collx/transport/shm.hpp>

namespace collx::test {

template <class Proto, coll C, class T, reduce_op Op>
__global__ void ring_kernel(transport::shm_view view, exec::cuda ex, const T* const* send, T* const* recv,
                            std::size_t count, int root, int* status_out, std::uint64_t timeout_ns) {
  // Block b is stripe b % S of rank b / S.
  const int S = view.nstripes(), b = static_cast<int>(blockIdx.x), rank = b / S, stripe = b % S;
  ex.deadline_ns = exec::globaltimer_ns() + timeout_ns;  // every wait of this launch is bounded
  reducer<T, Op> red{static_cast<std::uint32_t>(view.nranks())};
  schedule_args<T> a{send[rank], recv[rank], count, root, rank, view.nranks()};
  const status st = run_stripe<algo::ring, Proto, C>(ex, view, red, proto::channel_of<Proto>, a, stripe, S);
  if (threadIdx.x == 0) status_out[b] = static_cast<int>(st);
}

}  // namespace collx::test
