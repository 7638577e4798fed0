// collx/numeric/float8.hpp — 8-bit floating-point value types (OCP FP8).
//
// float8_e4m3_t  E4M3 "fn": sign, 4 exponent bits (bias 7), 3 mantissa bits;
//                subnormals, no infinities, NaN only as S.1111.111; max 448.
// float8_e5m2_t  E5M2: sign, 5 exponent bits (bias 15), 2 mantissa bits;
//                IEEE-like with subnormals, ±inf and NaN; max 57344.
//
// Conversions from float and from double round to nearest, ties to even, in
// one step from the source value, and saturate to finite (as CUDA's
// __NV_SATFINITE): finite values beyond the range and ±inf become ±max; NaN
// becomes a NaN of the same sign (0x7F / 0x7E with the sign bit).
// Conversions to float and double are exact. The host runs portable bit
// manipulation; a GPU from sm_89 on converts from and to float with cvt
// (collx/numeric/hardware.hpp), with the same bits.
#pragma once

#include <cstdint>

#include "collx/config.hpp"
#include "collx/numeric/float16.hpp"  // detail::lowp and the shared base

namespace collx {
namespace detail::lowp {

// Both convert saturating: overflow (and a source infinity) maps to max_finite.
using e4m3_format = format<std::uint8_t, 4, 3, specials::nan_only, on_overflow::saturate>;
using e5m2_format = format<std::uint8_t, 5, 2, specials::ieee, on_overflow::saturate>;

}  // namespace detail::lowp

struct float8_e4m3_t : detail::lowp_value::base<float8_e4m3_t, detail::lowp::e4m3_format> {
  using base::base;
};

struct float8_e5m2_t : detail::lowp_value::base<float8_e5m2_t, detail::lowp::e5m2_format> {
  using base::base;
};

}  // namespace collx
