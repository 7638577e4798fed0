// The kernels bench/stack_frame.sh compiles: gpu::collective_kernel, the
// kernel gpu::communicator launches, for six variants (FIFO protocols, the
// tree, the direct exchange, nvls over peer memory).
#include <collx/algo/direct.hpp>
#include <collx/algo/nvls.hpp>
#include <collx/algo/ring.hpp>
#include <collx/algo/tree.hpp>
#include <collx/cuda/kernel.hpp>
#include <collx/proto/ll.hpp>
#include <collx/proto/ll128.hpp>
#include <collx/proto/simple.hpp>
using namespace collx;
template <class A, class P, coll C>
void inst() {
  transport::mesh_view v{};
  exec::cuda ex{};
  schedule_args<float> a{};
  gpu::collective_kernel<A, P, C, float, reduce_op::sum><<<1, 256>>>(v, ex, a, nullptr);
}
template void inst<algo::ring, proto::simple, coll::all_reduce>();
template void inst<algo::ring, proto::ll, coll::all_reduce>();
template void inst<algo::tree, proto::ll128, coll::all_reduce>();
template void inst<algo::direct, proto::simple, coll::all_to_all>();
template void inst<algo::nvls, proto::simple, coll::all_reduce>();
template void inst<algo::nvls, proto::simple, coll::all_gather>();
