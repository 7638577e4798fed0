// The element loop under every primitive (detail::reduce_copy, one block)
// for narrow floats, one kernel per (type, op): what bench/lowp_ptx.sh
// compiles to PTX against two versions of the headers to count instructions.
#include <collx/detail/reduce_copy.hpp>
#include <collx/exec/cuda.hpp>
#include <collx/reduce_op.hpp>

using namespace collx;

template <class T, reduce_op Op>
__global__ void reduce_copy_kernel(const T* a, const T* b, T* d, std::size_t n) {
  const reducer<T, Op> red{2};
  detail::reduce_copy<true, Op == reduce_op::avg, 1>(exec::cuda_block_group{}, a, b, d, nullptr, n, red);
}

#define COLLX_KERNEL(T, OP) \
  template __global__ void reduce_copy_kernel<T, reduce_op::OP>(const T*, const T*, T*, std::size_t);
COLLX_KERNEL(half_t, sum)
COLLX_KERNEL(half_t, prod)
COLLX_KERNEL(half_t, min)
COLLX_KERNEL(half_t, avg)
COLLX_KERNEL(bfloat16_t, sum)
COLLX_KERNEL(bfloat16_t, prod)
COLLX_KERNEL(bfloat16_t, max)
COLLX_KERNEL(bfloat16_t, avg)
COLLX_KERNEL(float8_e4m3_t, sum)
COLLX_KERNEL(float8_e4m3_t, max)
COLLX_KERNEL(float8_e5m2_t, sum)
COLLX_KERNEL(float8_e5m2_t, min)
COLLX_KERNEL(float, sum)
