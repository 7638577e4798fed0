// collx/dtype.hpp — the element types collx moves and reduces.
//
// One enumerator per wire type; dtype_of<T> maps a C++ type to it and
// dtype_type<D> back. Names follow nccl-tests (int8 … float64, plus the
// fp8 formats) and parse_dtype accepts the usual aliases.
#pragma once

#include <collx/config.hpp>
#include <collx/detail/enum_set.hpp>
#include <collx/numeric/float16.hpp>
#include <collx/numeric/float8.hpp>

#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace collx {

enum class dtype : std::uint8_t {
  int8,
  uint8,
  int32,
  uint32,
  int64,
  uint64,
  float16,
  bfloat16,
  float32,
  float64,
  float8_e4m3,
  float8_e5m2,
};

inline constexpr int dtype_count = 12;

/// A set of dtypes: `dtype_set::of(dtype::float32, dtype::bfloat16)`, `dtype_set::all()`.
using dtype_set = detail::enum_set<dtype, dtype_count>;

namespace detail {
template <dtype D>
struct dtype_to_type;
#define COLLX_DTYPE_MAP(D, T)      \
  template <>                      \
  struct dtype_to_type<dtype::D> { \
    using type = T;                \
  };
COLLX_DTYPE_MAP(int8, std::int8_t)
COLLX_DTYPE_MAP(uint8, std::uint8_t)
COLLX_DTYPE_MAP(int32, std::int32_t)
COLLX_DTYPE_MAP(uint32, std::uint32_t)
COLLX_DTYPE_MAP(int64, std::int64_t)
COLLX_DTYPE_MAP(uint64, std::uint64_t)
COLLX_DTYPE_MAP(float16, half_t)
COLLX_DTYPE_MAP(bfloat16, bfloat16_t)
COLLX_DTYPE_MAP(float32, float)
COLLX_DTYPE_MAP(float64, double)
COLLX_DTYPE_MAP(float8_e4m3, float8_e4m3_t)
COLLX_DTYPE_MAP(float8_e5m2, float8_e5m2_t)
#undef COLLX_DTYPE_MAP

template <class T>
struct type_to_dtype;  // no mapping: not a collx element type
template <class T, dtype D>
struct type_to_dtype_is {
  static constexpr dtype value = D;
};
template <>
struct type_to_dtype<std::int8_t> : type_to_dtype_is<std::int8_t, dtype::int8> {};
template <>
struct type_to_dtype<std::uint8_t> : type_to_dtype_is<std::uint8_t, dtype::uint8> {};
template <>
struct type_to_dtype<std::int32_t> : type_to_dtype_is<std::int32_t, dtype::int32> {};
template <>
struct type_to_dtype<std::uint32_t> : type_to_dtype_is<std::uint32_t, dtype::uint32> {};
template <>
struct type_to_dtype<std::int64_t> : type_to_dtype_is<std::int64_t, dtype::int64> {};
template <>
struct type_to_dtype<std::uint64_t> : type_to_dtype_is<std::uint64_t, dtype::uint64> {};
template <>
struct type_to_dtype<half_t> : type_to_dtype_is<half_t, dtype::float16> {};
template <>
struct type_to_dtype<bfloat16_t> : type_to_dtype_is<bfloat16_t, dtype::bfloat16> {};
template <>
struct type_to_dtype<float> : type_to_dtype_is<float, dtype::float32> {};
template <>
struct type_to_dtype<double> : type_to_dtype_is<double, dtype::float64> {};
template <>
struct type_to_dtype<float8_e4m3_t> : type_to_dtype_is<float8_e4m3_t, dtype::float8_e4m3> {};
template <>
struct type_to_dtype<float8_e5m2_t> : type_to_dtype_is<float8_e5m2_t, dtype::float8_e5m2> {};
}  // namespace detail

/// The C++ element type of a dtype.
template <dtype D>
using dtype_type = typename detail::dtype_to_type<D>::type;

/// The dtype of a C++ element type; ill-formed for types collx does not move.
template <class T>
inline constexpr dtype dtype_of = detail::type_to_dtype<std::remove_cv_t<T>>::value;

COLLX_HOST_DEVICE constexpr bool is_valid(dtype d) { return static_cast<unsigned>(d) < dtype_count; }

COLLX_HOST_DEVICE constexpr std::size_t size_of(dtype d) {
  switch (d) {
    case dtype::int8:
    case dtype::uint8:
    case dtype::float8_e4m3:
    case dtype::float8_e5m2: return 1;
    case dtype::float16:
    case dtype::bfloat16: return 2;
    case dtype::int32:
    case dtype::uint32:
    case dtype::float32: return 4;
    case dtype::int64:
    case dtype::uint64:
    case dtype::float64: return 8;
  }
  return 0;
}

COLLX_HOST_DEVICE constexpr bool is_integral(dtype d) {
  return d == dtype::int8 || d == dtype::uint8 || d == dtype::int32 || d == dtype::uint32 ||
         d == dtype::int64 || d == dtype::uint64;
}

COLLX_HOST_DEVICE constexpr const char* name(dtype d) {
  switch (d) {
    case dtype::int8: return "int8";
    case dtype::uint8: return "uint8";
    case dtype::int32: return "int32";
    case dtype::uint32: return "uint32";
    case dtype::int64: return "int64";
    case dtype::uint64: return "uint64";
    case dtype::float16: return "half";
    case dtype::bfloat16: return "bfloat16";
    case dtype::float32: return "float";
    case dtype::float64: return "double";
    case dtype::float8_e4m3: return "f8e4m3";
    case dtype::float8_e5m2: return "f8e5m2";
  }
  return "invalid";
}

/// Calls f(type_identity<T>{}) with T the element type of d; returns false for
/// an invalid dtype. The single place where a runtime dtype becomes a type.
template <class F>
constexpr bool visit_dtype(dtype d, F&& f) {
  switch (d) {
#define COLLX_VISIT(D) \
  case dtype::D: f(std::type_identity<dtype_type<dtype::D>>{}); return true;
    COLLX_VISIT(int8)
    COLLX_VISIT(uint8)
    COLLX_VISIT(int32) COLLX_VISIT(uint32) COLLX_VISIT(int64) COLLX_VISIT(uint64) COLLX_VISIT(float16)
        COLLX_VISIT(bfloat16) COLLX_VISIT(float32) COLLX_VISIT(float64) COLLX_VISIT(float8_e4m3)
            COLLX_VISIT(float8_e5m2)
#undef COLLX_VISIT
  }
  return false;
}

}  // namespace collx
