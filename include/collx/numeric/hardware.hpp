// collx/numeric/hardware.hpp — narrow floats through a GPU's own instructions.
//
// In device code, half_t, bfloat16_t and the two fp8 types convert to and from
// float with cvt instead of the portable bit manipulation of lowp::encode and
// lowp::decode (about 30 integer operations per element), and two halves or
// two bfloat16s in one 32-bit word add or multiply in one packed instruction:
//
//   half      cvt.f32.f16, cvt.rn.f16.f32; add.rn.f16x2, mul.rn.f16x2 (every GPU)
//   bfloat16  cvt.rn.bf16.f32 (sm_80); fma.rn.bf16x2 (sm_80: a·1 + b, a·b + −0),
//             add.rn.bf16x2 and mul.rn.bf16x2 (sm_90)
//   fp8       cvt.rn.f16x2.{e4m3x2,e5m2x2}, cvt.rn.satfinite.{e4m3x2,e5m2x2}.f32
//             (sm_89); older GPUs keep the portable code
//
// Same bits as the host. Every conversion rounds to nearest, ties to even, in
// one step, saturates where the format does (fp8), and keeps subnormals, as
// lowp::encode does; a NaN result is rewritten to the NaN lowp::encode writes
// (and a NaN widened to float is the one lowp::decode returns), so a value
// converted on a GPU has the host's bits. The packed sum and product are the
// exact result rounded once to the format, which is also what the reducer
// computes in float and then rounds: binary32's 24 bits are at least 2p + 2 for
// half (p = 11) and bfloat16 (p = 8), so rounding twice gives the same value
// (tests/unit/test_dtype_lowp.cpp checks the host's side of this). Only the
// sign and payload of a NaN that the arithmetic produces may differ, as they
// already differ between the host's and the GPU's float arithmetic.
//
// The .rn qualifier on the packed arithmetic also keeps the compiler from
// contracting a sum and a product into one fused operation.
#pragma once

#include <cstdint>

#include "collx/config.hpp"

namespace collx::detail::lowp::hw {

#if COLLX_DEVICE_CODE

__device__ COLLX_ALWAYS_INLINE float half_to_float(std::uint16_t h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
}
__device__ COLLX_ALWAYS_INLINE std::uint16_t float_to_half(float f) {
  std::uint16_t h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
}

#if __CUDA_ARCH__ >= 800
__device__ COLLX_ALWAYS_INLINE std::uint16_t float_to_bfloat16(float f) {
  std::uint16_t h;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
}
#endif

#if __CUDA_ARCH__ >= 890
// One fp8 value in the low byte of the pair; the value lands in the low half.
__device__ COLLX_ALWAYS_INLINE float e4m3_to_float(std::uint8_t b) {
  std::uint32_t h2;
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(h2) : "h"(std::uint16_t(b)));
  return half_to_float(std::uint16_t(h2 & 0xFFFFu));
}
__device__ COLLX_ALWAYS_INLINE float e5m2_to_float(std::uint8_t b) {
  std::uint32_t h2;
  asm("cvt.rn.f16x2.e5m2x2 %0, %1;" : "=r"(h2) : "h"(std::uint16_t(b)));
  return half_to_float(std::uint16_t(h2 & 0xFFFFu));
}
// The second source operand is converted into the low byte.
__device__ COLLX_ALWAYS_INLINE std::uint8_t float_to_e4m3(float f) {
  std::uint16_t d;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(d) : "f"(0.0f), "f"(f));
  return std::uint8_t(d & 0xFFu);
}
__device__ COLLX_ALWAYS_INLINE std::uint8_t float_to_e5m2(float f) {
  std::uint16_t d;
  asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;" : "=h"(d) : "f"(0.0f), "f"(f));
  return std::uint8_t(d & 0xFFu);
}
#endif

/// Whether narrow(), widen() below have an instruction for format F here.
template <class F>
inline constexpr bool converts = F::exp_bits == 5 && F::mant == 10  // half
#if __CUDA_ARCH__ >= 800
                                 || (F::exp_bits == 8 && F::mant == 7)  // bfloat16 (encode only)
#endif
#if __CUDA_ARCH__ >= 890
                                 || (F::exp_bits == 4 && F::mant == 3) || (F::exp_bits == 5 && F::mant == 2)
#endif
    ;

/// float → F, rounded to nearest even (fp8: saturating). Only where converts<F>.
template <class F>
__device__ COLLX_ALWAYS_INLINE std::uint32_t narrow(float f) {
  std::uint32_t b;
  if constexpr (F::exp_bits == 5 && F::mant == 10) b = float_to_half(f);
#if __CUDA_ARCH__ >= 800
  else if constexpr (F::exp_bits == 8) b = float_to_bfloat16(f);
#endif
#if __CUDA_ARCH__ >= 890
  else if constexpr (F::exp_bits == 4) b = float_to_e4m3(f);
  else b = float_to_e5m2(f);
#endif
  // The instruction's NaN is canonical; lowp::encode keeps the source's sign.
  if (f != f) b = (__builtin_bit_cast(std::uint32_t, f) >> 31 ? F::sign : 0u) | F::nan;
  return b;
}

/// Whether widen<F> has an instruction (bfloat16 widens by a shift anyway).
template <class F>
inline constexpr bool widens = F::exp_bits == 5 && F::mant == 10
#if __CUDA_ARCH__ >= 890
                               || (F::exp_bits == 4 && F::mant == 3) || (F::exp_bits == 5 && F::mant == 2)
#endif
    ;

/// F → float, exact, except that a NaN comes back canonical: the caller
/// rebuilds it as lowp::decode would, with its sign and payload. Only where
/// widens<F>.
template <class F>
__device__ COLLX_ALWAYS_INLINE float widen(std::uint32_t b) {
  float f;
  if constexpr (F::mant == 10) f = half_to_float(std::uint16_t(b));
#if __CUDA_ARCH__ >= 890
  else if constexpr (F::exp_bits == 4) f = e4m3_to_float(std::uint8_t(b));
  else f = e5m2_to_float(std::uint8_t(b));
#endif
  return f;
}

// ---- two elements in one 32-bit word ------------------------------------------------

__device__ COLLX_ALWAYS_INLINE std::uint32_t add_half2(std::uint32_t a, std::uint32_t b) {
  std::uint32_t d;
  asm("add.rn.f16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  return d;
}
__device__ COLLX_ALWAYS_INLINE std::uint32_t mul_half2(std::uint32_t a, std::uint32_t b) {
  std::uint32_t d;
  asm("mul.rn.f16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  return d;
}

#if __CUDA_ARCH__ >= 800
__device__ COLLX_ALWAYS_INLINE std::uint32_t add_bfloat162(std::uint32_t a, std::uint32_t b) {
  std::uint32_t d;
#if __CUDA_ARCH__ >= 900
  asm("add.rn.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
#else
  // a·1 + b, one rounding; +0·1 + −0 is +0 as a + b is.
  asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(0x3F803F80u), "r"(b));
#endif
  return d;
}
__device__ COLLX_ALWAYS_INLINE std::uint32_t mul_bfloat162(std::uint32_t a, std::uint32_t b) {
  std::uint32_t d;
#if __CUDA_ARCH__ >= 900
  asm("mul.rn.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
#else
  // a·b + −0: adding −0 leaves every product, −0 included, as it is.
  asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(0x80008000u));
#endif
  return d;
}
#endif

/// Whether format F's pairs have a packed sum and product here.
template <class F>
inline constexpr bool pairs = F::exp_bits == 5 && F::mant == 10
#if __CUDA_ARCH__ >= 800
                              || (F::exp_bits == 8 && F::mant == 7)
#endif
    ;

/// The elementwise sum (Product = false) or product of two pairs of format F.
template <class F, bool Product>
__device__ COLLX_ALWAYS_INLINE std::uint32_t combine_pairs(std::uint32_t a, std::uint32_t b) {
  if constexpr (F::mant == 10) return Product ? mul_half2(a, b) : add_half2(a, b);
#if __CUDA_ARCH__ >= 800
  else return Product ? mul_bfloat162(a, b) : add_bfloat162(a, b);
#else
  else return 0;
#endif
}

#endif  // COLLX_DEVICE_CODE

}  // namespace collx::detail::lowp::hw
