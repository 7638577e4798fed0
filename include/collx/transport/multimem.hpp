// collx/transport/multimem.hpp — the NVSwitch's multicast instructions on
// 16-byte packs: which reductions the switch performs, and the PTX that asks
// it to.
//
// A multicast address (cuMulticastCreate, mapped with cuMemMap) stands for
// the same offset in every bound rank's memory. `multimem.ld_reduce` at such
// an address returns the element reduced over every copy, computed in the
// switch; `multimem.st` writes every copy. Hopper (sm_90) and later.
//
// What the switch is asked to reduce (PTX ISA, multimem): add of f32, f64,
// f16x2 and bf16x2 (the half types accumulated in f32, `.acc::f32`, rounded
// once), of 32- and 64-bit integers; min and max of integers; and, or, xor
// of 32- and 64-bit words. avg is an add finished by the reducer's post().
// Nothing for prod, 8-bit types or fp8 on sm_90, and not the min and max of
// f16x2/bf16x2 that the switch has: those return the other operand where
// one is NaN, reducer<> returns the NaN (a max over ranks is how programs
// look for a NaN), and the elements of a call off the 16-byte packs would
// follow one rule, the rest the other. multimem_reduces<> is false for all
// of these and the switch channel loads every peer instead
// (transport/switch_channel.hpp).
//
// Memory ordering: relaxed at system scope, as NCCL issues them. The
// peer-memory barrier before and after (prims::barrier: a system-scope
// release fence, stores, polls, an acquire fence) orders them against every
// rank's plain accesses of the same memory.
#pragma once

#include <collx/config.hpp>
#include <collx/detail/reduce_copy.hpp>
#include <collx/numeric/float16.hpp>
#include <collx/reduce_op.hpp>

#include <cstdint>
#include <cstring>
#include <type_traits>

// The instructions exist from sm_90; device code for older GPUs compiles the
// fallback only, as does nvcc before 12.2 (PTX ISA 8.2: ld_reduce's
// .acc::f32 forms).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && \
    (__CUDACC_VER_MAJOR__ > 12 || (__CUDACC_VER_MAJOR__ == 12 && __CUDACC_VER_MINOR__ >= 2))
#define COLLX_MULTIMEM_PTX 1
#else
#define COLLX_MULTIMEM_PTX 0
#endif

namespace collx::transport {

/// Whether the switch performs reduction `op` of T (see the header comment);
/// for an operator named at run time (the automatic choice prices it).
template <class T>
constexpr bool switch_reduces(reduce_op op) {
  const bool add = op == reduce_op::sum || op == reduce_op::avg;
  const bool minmax = op == reduce_op::min || op == reduce_op::max;
  const bool bits = op == reduce_op::band || op == reduce_op::bor || op == reduce_op::bxor;
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) return add;
  else if constexpr (std::is_same_v<T, half_t> || std::is_same_v<T, bfloat16_t>) return add;
  else if constexpr (std::is_integral_v<T> && (sizeof(T) == 4 || sizeof(T) == 8))
    return add || minmax || bits;
  else return (void)add, (void)minmax, (void)bits, false;
}

namespace multimem_detail {

template <class Red>
concept typed_reducer = requires {
  Red::op;
};

template <class T, reduce_op Op>
inline constexpr bool reduces = switch_reduces<T>(Op);

}  // namespace multimem_detail

/// Whether the switch performs Red's reduction of T (see the header comment).
template <class T, class Red>
inline constexpr bool multimem_reduces = false;
template <class T, multimem_detail::typed_reducer Red>
inline constexpr bool multimem_reduces<T, Red> =
    std::is_same_v<Red, reducer<T, Red::op>>&& multimem_detail::reduces<T, Red::op>;

#if COLLX_MULTIMEM_PTX

namespace multimem_detail {

#define COLLX_MM_LD4(suffix)                                                           \
  asm volatile("multimem.ld_reduce.relaxed.sys.global." suffix " {%0,%1,%2,%3}, [%4];" \
               : "=r"(w[0]), "=r"(w[1]), "=r"(w[2]), "=r"(w[3])                        \
               : "l"(addr)                                                             \
               : "memory")
#define COLLX_MM_LD32(suffix)                                               \
  for (int k = 0; k < 4; ++k)                                               \
  asm volatile("multimem.ld_reduce.relaxed.sys.global." suffix " %0, [%1];" \
               : "=r"(w[k])                                                 \
               : "l"(addr + 4 * k)                                          \
               : "memory")
#define COLLX_MM_LD64(suffix)                                               \
  for (int k = 0; k < 2; ++k)                                               \
  asm volatile("multimem.ld_reduce.relaxed.sys.global." suffix " %0, [%1];" \
               : "=l"(d[k])                                                 \
               : "l"(addr + 8 * k)                                          \
               : "memory")

/// The 16 bytes at multicast address `addr` reduced by the switch over every
/// bound copy, as four 32-bit or two 64-bit words.
template <class T, reduce_op Op>
__device__ COLLX_ALWAYS_INLINE void load_reduce_words(std::uintptr_t addr, std::uint32_t (&w)[4]) {
  constexpr bool add = Op == reduce_op::sum || Op == reduce_op::avg;
  if constexpr (std::is_same_v<T, float>) {
    COLLX_MM_LD4("add.v4.f32");
  } else if constexpr (std::is_same_v<T, half_t>) {
    COLLX_MM_LD4("add.acc::f32.v4.f16x2");
  } else if constexpr (std::is_same_v<T, bfloat16_t>) {
    COLLX_MM_LD4("add.acc::f32.v4.bf16x2");
  } else if constexpr (sizeof(T) == 4) {
    constexpr bool s = std::is_signed_v<T>;
    if constexpr (add) COLLX_MM_LD32("add.u32");
    else if constexpr (Op == reduce_op::min && s) COLLX_MM_LD32("min.s32");
    else if constexpr (Op == reduce_op::min) COLLX_MM_LD32("min.u32");
    else if constexpr (Op == reduce_op::max && s) COLLX_MM_LD32("max.s32");
    else if constexpr (Op == reduce_op::max) COLLX_MM_LD32("max.u32");
    else if constexpr (Op == reduce_op::band) COLLX_MM_LD32("and.b32");
    else if constexpr (Op == reduce_op::bor) COLLX_MM_LD32("or.b32");
    else COLLX_MM_LD32("xor.b32");
  } else {
    std::uint64_t d[2];
    constexpr bool s = std::is_signed_v<T>;
    if constexpr (std::is_same_v<T, double>) COLLX_MM_LD64("add.f64");
    else if constexpr (add) COLLX_MM_LD64("add.u64");
    else if constexpr (Op == reduce_op::min && s) COLLX_MM_LD64("min.s64");
    else if constexpr (Op == reduce_op::min) COLLX_MM_LD64("min.u64");
    else if constexpr (Op == reduce_op::max && s) COLLX_MM_LD64("max.s64");
    else if constexpr (Op == reduce_op::max) COLLX_MM_LD64("max.u64");
    else if constexpr (Op == reduce_op::band) COLLX_MM_LD64("and.b64");
    else if constexpr (Op == reduce_op::bor) COLLX_MM_LD64("or.b64");
    else COLLX_MM_LD64("xor.b64");
    std::memcpy(w, d, 16);
  }
}

#undef COLLX_MM_LD4
#undef COLLX_MM_LD32
#undef COLLX_MM_LD64

}  // namespace multimem_detail

/// The pack at multicast address `addr` (16-byte aligned) reduced over every
/// bound copy by the switch; multimem_reduces<T, Red> must hold.
template <class T, class Red>
__device__ COLLX_ALWAYS_INLINE detail::pack<T> multimem_load_reduce(std::uintptr_t addr) {
  static_assert(multimem_reduces<T, Red>, "the switch does not perform this reduction");
  std::uint32_t w[4];
  multimem_detail::load_reduce_words<T, Red::op>(addr, w);
  detail::pack<T> p;
  std::memcpy(&p, w, 16);
  return p;
}

/// Stores `p` at multicast address `addr` (16-byte aligned): every bound copy.
template <class T>
__device__ COLLX_ALWAYS_INLINE void multimem_store(std::uintptr_t addr, const detail::pack<T>& p) {
  std::uint32_t w[4];
  std::memcpy(w, &p, 16);
  asm volatile("multimem.st.relaxed.sys.global.v4.f32 [%0], {%1,%2,%3,%4};" ::"l"(addr), "r"(w[0]), "r"(w[1]),
               "r"(w[2]), "r"(w[3])
               : "memory");
}

#endif  // COLLX_MULTIMEM_PTX

/// Orders this thread's accesses through a multicast address against its
/// accesses to the same memory through an ordinary one (the PTX memory
/// model treats the two as different, virtually aliased addresses; a proxy
/// fence relates them). Placed around the barriers that separate the two
/// kinds of access, as NVIDIA's multicast barriers do; nothing without the
/// instructions, and nothing on the host, whose emulation uses one address.
COLLX_HOST_DEVICE COLLX_ALWAYS_INLINE void multimem_alias_fence() {
#if COLLX_MULTIMEM_PTX
  asm volatile("fence.proxy.alias;" ::: "memory");
#endif
}

}  // namespace collx::transport
