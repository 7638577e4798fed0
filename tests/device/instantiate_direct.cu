// Compile-only check (PTX, built by the cuda preset; nothing here runs): the
// direct family (one-shot, two-shot, all-to-all, send/recv, barrier) and
// bruck_a2a under every protocol, at a spread of element types and ops.
#include "instantiate_kernels.cuh"

namespace collx::test {

template void instantiate_direct<proto::simple, float, reduce_op::sum>();
template void instantiate_direct<proto::simple, half_t, reduce_op::avg>();
template void instantiate_direct<proto::simple, std::uint8_t, reduce_op::max>();
template void instantiate_direct<proto::simple, double, reduce_op::prod>();
template void instantiate_direct<proto::ll, float, reduce_op::sum>();
template void instantiate_direct<proto::ll, std::uint8_t, reduce_op::max>();
template void instantiate_direct<proto::ll128, half_t, reduce_op::avg>();
template void instantiate_direct<proto::ll128, std::uint8_t, reduce_op::max>();

}  // namespace collx::test
