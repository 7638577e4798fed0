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
// The host runs portable bit manipulation; a GPU converts from and to float
// with its cvt instructions where it has them (collx/numeric/hardware.hpp),
// which give the same bits, so a value converted in a kernel has the bits of
// one converted on the host.
#pragma once

#include <cstdint>

#include "collx/config.hpp"
#include "collx/numeric/hardware.hpp"

namespace collx {
namespace detail::lowp {

template <class To, class From>
COLLX_HOST_DEVICE constexpr To bit_cast(const From& from) noexcept {
  static_assert(sizeof(To) == sizeof(From));
  return __builtin_bit_cast(To, from);
}

// A narrow format as the encoder and decoder see it: sign, exp_bits exponent
// bits with bias 2^(exp_bits-1) - 1, mant mantissa bits, held in `storage`.
// With `specials::ieee` the all-ones exponent encodes inf (mantissa 0) and NaN;
// with `specials::nan_only` (OCP "fn") only the all-ones pattern is NaN and
// every other pattern is finite. `overflow` is what a finite value rounding
// beyond max_finite, or a source infinity, becomes: infinity, or max_finite
// for a saturating conversion. `nan` is the positive quiet NaN written for a
// NaN source.
enum class specials { ieee, nan_only };
enum class on_overflow { to_inf, saturate };

template <class Storage, int ExpBits, int Mant, specials Specials, on_overflow Overflow>
struct format {
  static_assert(Specials == specials::ieee || Overflow == on_overflow::saturate,
                "a format without infinity must saturate");
  using storage = Storage;
  static constexpr int exp_bits = ExpBits, mant = Mant, bias = (1 << (ExpBits - 1)) - 1;
  static constexpr bool ieee = Specials == specials::ieee;
  static constexpr std::uint32_t sign = 1u << (ExpBits + Mant);
  // The all-ones exponent with mantissa 0: infinity when ieee.
  static constexpr std::uint32_t top_exp = ((1u << ExpBits) - 1) << Mant;
  static constexpr std::uint32_t max_finite = ieee ? top_exp - 1 : sign - 2;
  static constexpr std::uint32_t overflow = Overflow == on_overflow::to_inf ? top_exp : max_finite;
  static constexpr std::uint32_t nan = ieee ? top_exp | (1u << (Mant - 1)) : sign - 1;
};

using half_format = format<std::uint16_t, 5, 10, specials::ieee, on_overflow::to_inf>;
using bfloat16_format = format<std::uint16_t, 8, 7, specials::ieee, on_overflow::to_inf>;

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

// The binary32 bits, sign aside, of a pattern of F with mantissa `man` and an
// all-ones exponent: inf or a NaN keeping its payload (IEEE formats), or the
// one NaN of a format without infinity.
template <class F>
COLLX_HOST_DEVICE constexpr std::uint32_t widened_special(std::uint32_t man) noexcept {
  return F::ieee ? 0x7F800000u | (man << (23 - F::mant)) : 0x7FC00000u;
}

// Exact widening of format F to binary32. Every value of half and of both fp8
// formats is zero or a binary32 normal, so no float subnormal is produced and
// the result is the same under flush-to-zero. A format with binary32's
// exponent (bfloat16) is binary32's leading bits and widens by a shift.
template <class F>
COLLX_HOST_DEVICE constexpr float decode(std::uint32_t b) noexcept {
  if constexpr (F::exp_bits == 8) {
    static_assert(F::bias == 127 && F::ieee);
    return bit_cast<float>(b << (23 - F::mant));
  }
  constexpr std::uint32_t exp_ones = (1u << F::exp_bits) - 1, mant_ones = (1u << F::mant) - 1;
  const std::uint32_t sign = (b & F::sign) ? 0x80000000u : 0u;
  const std::uint32_t exp = (b >> F::mant) & exp_ones;
  const std::uint32_t man = b & mant_ones;
  std::uint32_t out;
  if ((F::ieee && exp == exp_ones) || (!F::ieee && exp == exp_ones && man == mant_ones)) {
    out = widened_special<F>(man);
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

// A namespace of its own: a base class's namespace joins the argument-dependent
// lookup of the types derived from it, and this one declares no functions.
namespace detail::lowp_value {

// The members shared by every narrow float type. Derived is the public type
// (half_t, ...), which adds nothing but its name, so from_bits and the limits
// return it; Format (a detail::lowp format) gives the encoding. Derived is
// standard layout and trivially copyable, with a trivial default constructor
// that leaves `bits` uninitialized; `T{}` is +0.
template <class Derived, class Format>
struct base {
  using format = Format;  // the encoding (a detail::lowp format)
  typename Format::storage bits;

  base() = default;
  COLLX_HOST_DEVICE constexpr explicit base(float f) noexcept : bits(from_float(f)) {}
  COLLX_HOST_DEVICE constexpr explicit base(double d) noexcept
      : bits(typename Format::storage(lowp::encode<Format>(lowp::bit_cast<std::uint64_t>(d)))) {}

  COLLX_HOST_DEVICE constexpr explicit operator float() const noexcept {
#if COLLX_DEVICE_CODE
    // The GPU's cvt where it has one (collx/numeric/hardware.hpp): the same bits.
    if constexpr (lowp::hw::widens<Format>)
      if (!__builtin_is_constant_evaluated()) {
        const float f = lowp::hw::widen<Format>(bits);
        if (f == f) return f;
        // The instruction's NaN is canonical; decode's keeps the sign and payload.
        const std::uint32_t b = bits, sign = (b & Format::sign) ? 0x80000000u : 0u;
        return lowp::bit_cast<float>(sign | lowp::widened_special<Format>(b & ((1u << Format::mant) - 1)));
      }
#endif
    return lowp::decode<Format>(bits);
  }
  COLLX_HOST_DEVICE constexpr explicit operator double() const noexcept {
    return double(lowp::decode<Format>(bits));
  }

  COLLX_HOST_DEVICE static constexpr typename Format::storage from_float(float f) noexcept {
#if COLLX_DEVICE_CODE
    if constexpr (lowp::hw::converts<Format>)
      if (!__builtin_is_constant_evaluated()) return typename Format::storage(lowp::hw::narrow<Format>(f));
#endif
    return typename Format::storage(lowp::encode<Format>(lowp::bit_cast<std::uint32_t>(f)));
  }

  COLLX_HOST_DEVICE static constexpr Derived from_bits(typename Format::storage b) noexcept {
    Derived v{};
    v.bits = b;
    return v;
  }
  // The most negative and the largest finite value, and the gap between 1 and
  // the next value up: 2^-mant, whose biased exponent is bias - mant.
  COLLX_HOST_DEVICE static constexpr Derived lowest() noexcept {
    return from_bits(typename Format::storage(Format::sign | Format::max_finite));
  }
  COLLX_HOST_DEVICE static constexpr Derived max() noexcept {
    return from_bits(typename Format::storage(Format::max_finite));
  }
  COLLX_HOST_DEVICE static constexpr Derived epsilon() noexcept {
    return from_bits(typename Format::storage((Format::bias - Format::mant) << Format::mant));
  }
};

}  // namespace detail::lowp_value

struct half_t : detail::lowp_value::base<half_t, detail::lowp::half_format> {
  using base::base;
};

struct bfloat16_t : detail::lowp_value::base<bfloat16_t, detail::lowp::bfloat16_format> {
  using base::base;
};

}  // namespace collx
