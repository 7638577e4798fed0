// collx/numeric/float16.hpp — 16-bit floating-point value types.
//
// half_t      IEEE 754 binary16: sign, 5 exponent bits (bias 15), 10 mantissa
//             bits; subnormals, ±inf and NaN. A finite value at or above
//             max + ulp/2 converts to ±inf, as IEEE prescribes.
// bfloat16_t  the upper half of an IEEE binary32: sign, 8 exponent bits
//             (bias 127), 7 mantissa bits; float's range, subnormals, inf, NaN.
//
// Conversions from float and from double round to nearest, ties to even, in a
// single step from the source value: a double is never narrowed through float
// first, which would round twice. NaN converts to a quiet NaN of the same
// sign. Conversions to float and double are exact.
//
// Host and device run the same bit-manipulation code, so a value converted in
// a kernel has the same bits as one converted on the host.
#pragma once

#include <cstdint>

#include "collx/config.hpp"

namespace collx {
namespace detail::lowp {

template <class To, class From>
COLLX_HOST_DEVICE constexpr To bit_cast(const From& from) noexcept {
  static_assert(sizeof(To) == sizeof(From));
  return __builtin_bit_cast(To, from);
}

// A narrow format as the encoder and decoder see it. `overflow` is what a
// finite value rounding beyond max_finite, or a source infinity, becomes:
// infinity for IEEE-style formats, max_finite for saturating ones. `nan` is
// the positive quiet NaN written for a NaN source. `ieee` says the all-ones
// exponent encodes inf/NaN (otherwise only the all-ones pattern is NaN).
struct half_format {
  static constexpr int exp_bits = 5, mant = 10, bias = 15;
  static constexpr bool ieee = true;
  static constexpr std::uint32_t sign = 0x8000, max_finite = 0x7BFF, overflow = 0x7C00,
                                 nan = 0x7E00;
};
struct bfloat16_format {
  static constexpr int exp_bits = 8, mant = 7, bias = 127;
  static constexpr bool ieee = true;
  static constexpr std::uint32_t sign = 0x8000, max_finite = 0x7F7F, overflow = 0x7F80,
                                 nan = 0x7FC0;
};

// Rounds a binary32 (U = uint32_t) or binary64 (U = uint64_t) bit pattern to
// format F, nearest-even, in one step.
template <class F, class U>
COLLX_HOST_DEVICE constexpr std::uint32_t encode(U x) noexcept {
  constexpr int src_mant = sizeof(U) == 8 ? 52 : 23;
  constexpr int src_bias = sizeof(U) == 8 ? 1023 : 127;
  constexpr U exp_ones = sizeof(U) == 8 ? 0x7FF : 0xFF;
  const std::uint32_t sign = (x >> (sizeof(U) * 8 - 1)) ? F::sign : 0u;
  const U exp = (x >> src_mant) & exp_ones;
  U sig = x & ((U(1) << src_mant) - 1);
  if (exp == exp_ones) return sign | (sig ? F::nan : F::overflow);

  // value = sig * 2^(e - src_mant); source subnormals have no implicit bit.
  int e = 1 - src_bias;
  if (exp != 0) {
    sig |= U(1) << src_mant;
    e = int(exp) - src_bias;
  }
  // te: the biased target exponent if the value were a target normal. Below 1
  // the target is subnormal with a fixed ulp, so the shift grows instead.
  const int te = e + F::bias;
  int shift = src_mant - F::mant + (te < 1 ? 1 - te : 0);
  // sig < 2^(src_mant+1): past this shift the value is below half the
  // smallest subnormal and rounds to zero; clamping keeps the shifts defined.
  if (shift > src_mant + 2) shift = src_mant + 2;
  U q = sig >> shift;
  const U rem = sig & ((U(1) << shift) - 1);
  const U half = U(1) << (shift - 1);
  if (rem > half || (rem == half && (q & 1))) ++q;
  // q still holds the implicit bit, so adding it to the exponent field lets a
  // mantissa that rounds up carry into the exponent (and a subnormal become
  // the smallest normal) without a special case.
  const U mag = (U(te < 1 ? 0 : te - 1) << F::mant) + q;
  return sign | (mag > F::max_finite ? F::overflow : std::uint32_t(mag));
}

// Exact widening of format F to binary32. Every value of half and of both fp8
// formats is zero or a binary32 normal, so no float subnormal is produced and
// the result is the same under flush-to-zero. (bfloat16 widens by a shift.)
template <class F>
COLLX_HOST_DEVICE constexpr float decode(std::uint32_t b) noexcept {
  constexpr std::uint32_t exp_ones = (1u << F::exp_bits) - 1, mant_ones = (1u << F::mant) - 1;
  const std::uint32_t sign = (b & F::sign) ? 0x80000000u : 0u;
  const std::uint32_t exp = (b >> F::mant) & exp_ones;
  const std::uint32_t man = b & mant_ones;
  std::uint32_t out;
  if (F::ieee && exp == exp_ones) {
    out = 0x7F800000u | (man << (23 - F::mant));  // inf, or NaN keeping its payload
  } else if (!F::ieee && exp == exp_ones && man == mant_ones) {
    out = 0x7FC00000u;
  } else if (exp != 0) {
    out = ((exp + 127 - F::bias) << 23) | (man << (23 - F::mant));
  } else if (man == 0) {
    out = 0;
  } else {
    // Subnormal: man * 2^(1 - bias - mant). float(man) is exact and normal;
    // lowering its exponent field divides it exactly by the power of two.
    out = bit_cast<std::uint32_t>(float(man)) - (std::uint32_t(F::bias + F::mant - 1) << 23);
  }
  return bit_cast<float>(sign | out);
}

}  // namespace detail::lowp

struct half_t {
  std::uint16_t bits;

  half_t() = default;
  COLLX_HOST_DEVICE constexpr explicit half_t(float f) noexcept
      : bits(std::uint16_t(detail::lowp::encode<detail::lowp::half_format>(
            detail::lowp::bit_cast<std::uint32_t>(f)))) {}
  COLLX_HOST_DEVICE constexpr explicit half_t(double d) noexcept
      : bits(std::uint16_t(detail::lowp::encode<detail::lowp::half_format>(
            detail::lowp::bit_cast<std::uint64_t>(d)))) {}

  COLLX_HOST_DEVICE constexpr explicit operator float() const noexcept {
    return detail::lowp::decode<detail::lowp::half_format>(bits);
  }
  COLLX_HOST_DEVICE constexpr explicit operator double() const noexcept {
    return double(static_cast<float>(*this));
  }

  COLLX_HOST_DEVICE static constexpr half_t from_bits(std::uint16_t b) noexcept {
    half_t h{};
    h.bits = b;
    return h;
  }
  COLLX_HOST_DEVICE static constexpr half_t lowest() noexcept { return from_bits(0xFBFF); }
  COLLX_HOST_DEVICE static constexpr half_t max() noexcept { return from_bits(0x7BFF); }  // 65504
  COLLX_HOST_DEVICE static constexpr half_t epsilon() noexcept { return from_bits(0x1400); }  // 2^-10
};

struct bfloat16_t {
  std::uint16_t bits;

  bfloat16_t() = default;
  COLLX_HOST_DEVICE constexpr explicit bfloat16_t(float f) noexcept
      : bits(std::uint16_t(detail::lowp::encode<detail::lowp::bfloat16_format>(
            detail::lowp::bit_cast<std::uint32_t>(f)))) {}
  COLLX_HOST_DEVICE constexpr explicit bfloat16_t(double d) noexcept
      : bits(std::uint16_t(detail::lowp::encode<detail::lowp::bfloat16_format>(
            detail::lowp::bit_cast<std::uint64_t>(d)))) {}

  COLLX_HOST_DEVICE constexpr explicit operator float() const noexcept {
    return detail::lowp::bit_cast<float>(std::uint32_t(bits) << 16);
  }
  COLLX_HOST_DEVICE constexpr explicit operator double() const noexcept {
    return double(static_cast<float>(*this));
  }

  COLLX_HOST_DEVICE static constexpr bfloat16_t from_bits(std::uint16_t b) noexcept {
    bfloat16_t h{};
    h.bits = b;
    return h;
  }
  COLLX_HOST_DEVICE static constexpr bfloat16_t lowest() noexcept { return from_bits(0xFF7F); }
  COLLX_HOST_DEVICE static constexpr bfloat16_t max() noexcept { return from_bits(0x7F7F); }
  COLLX_HOST_DEVICE static constexpr bfloat16_t epsilon() noexcept { return from_bits(0x3C00); }  // 2^-7
};

}  // namespace collx
