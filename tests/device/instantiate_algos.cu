// Compile-only check (PTX, built by the cuda preset; nothing here runs): every other
// algorithm, every collective it implements, under every protocol; and
// schedules over proto::runtime, the protocol chosen per call.
#include "instantiate_kernels.cuh"

#include <collx/transport/mesh.hpp>
#include <collx/tune/presets.hpp>
#include <collx/tune/select.hpp>

#include <type_traits>

namespace collx::test {

// The compile-time choice in a CUDA translation unit, for a device executor:
// a kernel takes its variant as types (tune/select.hpp). The same decision as
// tests/unit/test_tune_presets.cpp's for the host: staged (buffers not
// registered), nvls trails rhd at 256 MiB by its copies around the switch.
using h100_large = tune::best_t<coll::all_reduce, std::size_t{256} << 20, 8, tune::h100_nvswitch,
                                transport::shm, exec::cuda>;
static_assert(std::is_same_v<h100_large::algorithm, algo::rhd> &&
              std::is_same_v<h100_large::protocol, proto::simple>);
template __global__ void algo_kernel<h100_large::algorithm, h100_large::protocol, coll::all_reduce, float,
                                     reduce_op::sum>(transport::shm_view, exec::cuda, const float*, float*,
                                                     std::size_t, const peer_layout*, const p2p_plan*,
                                                     mismatch_report*, int*);

// nvls over the mesh transport, as a GPU communicator launches it (block s
// runs stripe s): with the call's registered windows in the view, its
// single-copy paths (one-shot and two-shot all_reduce, reading peers'
// buffers in place) are compiled too, and the PTX rules see the loads of
// the peers' published lines.
template <coll C, class T = float, reduce_op Op = reduce_op::sum>
__global__ void nvls_mesh_kernel(const __grid_constant__ transport::mesh_view view, exec::cuda ex,
                                 schedule_args<T> a, int* status_out) {
  const reducer<T, Op> red{static_cast<std::uint32_t>(view.nranks())};
  const status st = run_stripe<algo::nvls, proto::simple, C>(
      ex, view, red, 0, a, static_cast<int>(blockIdx.x), static_cast<int>(gridDim.x));
  if (threadIdx.x == 0) status_out[0] = static_cast<int>(st);
}
template __global__ void nvls_mesh_kernel<coll::all_reduce>(const __grid_constant__ transport::mesh_view,
                                                            exec::cuda, schedule_args<float>, int*);
template __global__ void nvls_mesh_kernel<coll::reduce_scatter>(const __grid_constant__ transport::mesh_view,
                                                                exec::cuda, schedule_args<float>, int*);
template __global__ void nvls_mesh_kernel<coll::all_gather>(const __grid_constant__ transport::mesh_view,
                                                            exec::cuda, schedule_args<float>, int*);
template __global__ void nvls_mesh_kernel<coll::broadcast>(const __grid_constant__ transport::mesh_view,
                                                           exec::cuda, schedule_args<float>, int*);
template __global__ void nvls_mesh_kernel<coll::all_to_all>(const __grid_constant__ transport::mesh_view,
                                                            exec::cuda, schedule_args<float>, int*);

// The switch channel's multimem instructions (transport/multimem.hpp) for
// every kind of element and operation the switch reduces, so that ptxas
// checks each form on the architectures that have them (the PTX check's
// `multimem` rule asserts them), and ones it is not asked to (float max, half
// min, bfloat16 max: the peers).
#define COLLX_NVLS_MC(T, OP)                                                     \
  template __global__ void nvls_mesh_kernel<coll::all_reduce, T, reduce_op::OP>( \
      const __grid_constant__ transport::mesh_view, exec::cuda, schedule_args<T>, int*);
COLLX_NVLS_MC(float, avg)
COLLX_NVLS_MC(float, max)
COLLX_NVLS_MC(double, sum)
COLLX_NVLS_MC(half_t, sum)
COLLX_NVLS_MC(half_t, min)
COLLX_NVLS_MC(bfloat16_t, sum)
COLLX_NVLS_MC(bfloat16_t, max)
COLLX_NVLS_MC(std::int32_t, max)
COLLX_NVLS_MC(std::uint32_t, bxor)
COLLX_NVLS_MC(std::int64_t, sum)
COLLX_NVLS_MC(std::int64_t, min)
COLLX_NVLS_MC(std::uint64_t, band)
#undef COLLX_NVLS_MC

// The other algorithms add schedules, not element paths: two element types
// (a native one, and a converted one with a post-free op) cover them.
template void instantiate_algos<float, reduce_op::sum>();
template void instantiate_algos<half_t, reduce_op::max>();
template void instantiate_runtime_protocol<float, reduce_op::sum>();

}  // namespace collx::test
