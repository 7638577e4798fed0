// Compile-only check (PTX, built by the cuda preset; nothing here runs): the ring's
// schedules under every protocol for every element type, each with an op.
#include "instantiate_kernels.cuh"

namespace collx::test {

// Ring takes every dtype and op: its element paths are the ones every
// schedule shares.
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
