// Compile-only check: the algorithm, protocol and primitive code instantiates
// in device code for every collective and a spread of element types and ops.
// Built for sm_80 and sm_90 by the cuda preset; nothing here runs.
#include "ring_kernels.cuh"

namespace collx::test {

template <class Proto, class T, reduce_op Op>
void instantiate_proto() {
  transport::shm_view v{};
  exec::cuda ex{};
  ring_kernel<Proto, coll::all_reduce, T, Op><<<1, 1>>>(v, ex, nullptr, nullptr, 0, 0, nullptr, 0);
  ring_kernel<Proto, coll::reduce_scatter, T, Op><<<1, 1>>>(v, ex, nullptr, nullptr, 0, 0, nullptr, 0);
  ring_kernel<Proto, coll::reduce, T, Op><<<1, 1>>>(v, ex, nullptr, nullptr, 0, 0, nullptr, 0);
  ring_kernel<Proto, coll::all_gather, T, Op><<<1, 1>>>(v, ex, nullptr, nullptr, 0, 0, nullptr, 0);
  ring_kernel<Proto, coll::broadcast, T, Op><<<1, 1>>>(v, ex, nullptr, nullptr, 0, 0, nullptr, 0);
}

template <class T, reduce_op Op>
void instantiate_all() {
  instantiate_proto<proto::simple, T, Op>();
  instantiate_proto<proto::ll, T, Op>();
  instantiate_proto<proto::ll128, T, Op>();
}

template void instantiate_all<float, reduce_op::sum>();
template void instantiate_all<double, reduce_op::avg>();
template void instantiate_all<half_t, reduce_op::sum>();
template void instantiate_all<bfloat16_t, reduce_op::max>();
template void instantiate_all<float8_e4m3_t, reduce_op::sum>();
template void instantiate_all<float8_e5m2_t, reduce_op::min>();
template void instantiate_all<std::int32_t, reduce_op::prod>();
template void instantiate_all<std::uint8_t, reduce_op::bxor>();
template void instantiate_all<std::int64_t, reduce_op::band>();

}  // namespace collx::test
