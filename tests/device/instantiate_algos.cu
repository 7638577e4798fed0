// Compile-only check (PTX, built by the cuda preset; nothing here runs): every other
// algorithm, every collective it implements, under every protocol; and
// schedules over proto::runtime, the protocol chosen per call.
#include "instantiate_kernels.cuh"

namespace collx::test {

// The other algorithms add schedules, not element paths: two element types
// (a native one, and a converted one with a post-free op) cover them.
template void instantiate_algos<float, reduce_op::sum>();
template void instantiate_algos<half_t, reduce_op::max>();
template void instantiate_runtime_protocol<float, reduce_op::sum>();

}  // namespace collx::test
