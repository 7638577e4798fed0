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
// Conversions to float and double are exact. Host and device run the same
// bit-manipulation code, so both produce the same bits.
#pragma once

#include <cstdint>

#include "collx/config.hpp"
#include "collx/numeric/float16.hpp"  // shared encoder/decoder in detail::lowp

namespace collx {
namespace detail::lowp {

// Saturating: overflow (and a source infinity) maps to max_finite.
struct e4m3_format {
  static constexpr int exp_bits = 4, mant = 3, bias = 7;
  static constexpr bool ieee = false;
  static constexpr std::uint32_t sign = 0x80, max_finite = 0x7E, overflow = 0x7E, nan = 0x7F;
};
struct e5m2_format {
  static constexpr int exp_bits = 5, mant = 2, bias = 15;
  static constexpr bool ieee = true;
  static constexpr std::uint32_t sign = 0x80, max_finite = 0x7B, overflow = 0x7B, nan = 0x7E;
};

}  // namespace detail::lowp

struct float8_e4m3_t {
  std::uint8_t bits;

  float8_e4m3_t() = default;
  COLLX_HOST_DEVICE constexpr explicit float8_e4m3_t(float f) noexcept
      : bits(std::uint8_t(detail::lowp::encode<detail::lowp::e4m3_format>(
            detail::lowp::bit_cast<std::uint32_t>(f)))) {}
  COLLX_HOST_DEVICE constexpr explicit float8_e4m3_t(double d) noexcept
      : bits(std::uint8_t(detail::lowp::encode<detail::lowp::e4m3_format>(
            detail::lowp::bit_cast<std::uint64_t>(d)))) {}

  COLLX_HOST_DEVICE constexpr explicit operator float() const noexcept {
    return detail::lowp::decode<detail::lowp::e4m3_format>(bits);
  }
  COLLX_HOST_DEVICE constexpr explicit operator double() const noexcept {
    return double(static_cast<float>(*this));
  }

  COLLX_HOST_DEVICE static constexpr float8_e4m3_t from_bits(std::uint8_t b) noexcept {
    float8_e4m3_t v{};
    v.bits = b;
    return v;
  }
  COLLX_HOST_DEVICE static constexpr float8_e4m3_t lowest() noexcept { return from_bits(0xFE); }
  COLLX_HOST_DEVICE static constexpr float8_e4m3_t max() noexcept { return from_bits(0x7E); }  // 448
  COLLX_HOST_DEVICE static constexpr float8_e4m3_t epsilon() noexcept { return from_bits(0x20); }  // 2^-3
};

struct float8_e5m2_t {
  std::uint8_t bits;

  float8_e5m2_t() = default;
  COLLX_HOST_DEVICE constexpr explicit float8_e5m2_t(float f) noexcept
      : bits(std::uint8_t(detail::lowp::encode<detail::lowp::e5m2_format>(
            detail::lowp::bit_cast<std::uint32_t>(f)))) {}
  COLLX_HOST_DEVICE constexpr explicit float8_e5m2_t(double d) noexcept
      : bits(std::uint8_t(detail::lowp::encode<detail::lowp::e5m2_format>(
            detail::lowp::bit_cast<std::uint64_t>(d)))) {}

  COLLX_HOST_DEVICE constexpr explicit operator float() const noexcept {
    return detail::lowp::decode<detail::lowp::e5m2_format>(bits);
  }
  COLLX_HOST_DEVICE constexpr explicit operator double() const noexcept {
    return double(static_cast<float>(*this));
  }

  COLLX_HOST_DEVICE static constexpr float8_e5m2_t from_bits(std::uint8_t b) noexcept {
    float8_e5m2_t v{};
    v.bits = b;
    return v;
  }
  COLLX_HOST_DEVICE static constexpr float8_e5m2_t lowest() noexcept { return from_bits(0xFB); }
  COLLX_HOST_DEVICE static constexpr float8_e5m2_t max() noexcept { return from_bits(0x7B); }  // 57344
  COLLX_HOST_DEVICE static constexpr float8_e5m2_t epsilon() noexcept { return from_bits(0x34); }  // 2^-2
};

}  // namespace collx
