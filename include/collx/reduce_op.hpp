// collx/reduce_op.hpp — reduction operators, one definition for host and device.
//
// Floating types of fewer than 32 bits are reduced in float and rounded back to
// their format after every operation (as the wire carries them). Integer sum and
// prod wrap modulo 2^bits (computed in the unsigned type, so no UB). avg is a sum
// followed, on the rank that finalises an element, by a division by the number of
// ranks (integer division for integer types). band/bor/bxor exist for integer
// types only; is_supported(op, dtype) says which pairs are valid.
#pragma once

#include <collx/config.hpp>
#include <collx/detail/enum_set.hpp>
#include <collx/dtype.hpp>

#include <cstdint>
#include <type_traits>

namespace collx {

enum class reduce_op : std::uint8_t { sum, prod, min, max, avg, band, bor, bxor };

inline constexpr int reduce_op_count = 8;

/// A set of operators: `reduce_op_set::of(reduce_op::sum, reduce_op::max)`, `reduce_op_set::all()`.
using reduce_op_set = detail::enum_set<reduce_op, reduce_op_count>;

COLLX_HOST_DEVICE constexpr const char* name(reduce_op op) {
  switch (op) {
    case reduce_op::sum: return "sum";
    case reduce_op::prod: return "prod";
    case reduce_op::min: return "min";
    case reduce_op::max: return "max";
    case reduce_op::avg: return "avg";
    case reduce_op::band: return "band";
    case reduce_op::bor: return "bor";
    case reduce_op::bxor: return "bxor";
  }
  return "invalid";
}

COLLX_HOST_DEVICE constexpr bool is_valid(reduce_op op) {
  return static_cast<unsigned>(op) < reduce_op_count;
}

COLLX_HOST_DEVICE constexpr bool is_bitwise(reduce_op op) {
  return op == reduce_op::band || op == reduce_op::bor || op == reduce_op::bxor;
}

/// Whether collx implements op on elements of type d.
COLLX_HOST_DEVICE constexpr bool is_supported(reduce_op op, dtype d) {
  return is_valid(op) && is_valid(d) && (!is_bitwise(op) || is_integral(d));
}

namespace detail {

/// The type arithmetic happens in: float for the narrow floating formats.
template <class T>
struct compute_type {
  using type = T;
};
template <>
struct compute_type<half_t> {
  using type = float;
};
template <>
struct compute_type<bfloat16_t> {
  using type = float;
};
template <>
struct compute_type<float8_e4m3_t> {
  using type = float;
};
template <>
struct compute_type<float8_e5m2_t> {
  using type = float;
};

template <class T>
COLLX_HOST_DEVICE COLLX_ALWAYS_INLINE typename compute_type<T>::type widen(T v) {
  return static_cast<typename compute_type<T>::type>(v);
}
template <class T, class C>
COLLX_HOST_DEVICE COLLX_ALWAYS_INLINE T narrow(C v) {
  return static_cast<T>(v);
}

template <class T>
using wrap_type = std::conditional_t<std::is_integral_v<T>, std::make_unsigned_t<T>, T>;

}  // namespace detail

/// A reduction operator bound to its element type. operator() combines two
/// elements; post() finishes an element once all contributions are combined
/// (the division of avg; identity otherwise). Trivially copyable, so a device
/// kernel can take it by value.
template <class T, reduce_op Op>
struct reducer {
  static_assert(!is_bitwise(Op) || std::is_integral_v<T>, "bitwise reductions need an integer type");
  static constexpr reduce_op op = Op;
  static constexpr bool has_post = Op == reduce_op::avg;
  using C = typename detail::compute_type<T>::type;

  std::uint32_t nranks = 1;  // divisor of avg

  COLLX_HOST_DEVICE COLLX_ALWAYS_INLINE T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      using U = detail::wrap_type<T>;
      const U x = static_cast<U>(a), y = static_cast<U>(b);
      if constexpr (Op == reduce_op::sum || Op == reduce_op::avg)
        return static_cast<T>(static_cast<U>(x + y));
      else if constexpr (Op == reduce_op::prod) return static_cast<T>(static_cast<U>(x * y));
      else if constexpr (Op == reduce_op::min) return b < a ? b : a;
      else if constexpr (Op == reduce_op::max) return a < b ? b : a;
      else if constexpr (Op == reduce_op::band) return static_cast<T>(x & y);
      else if constexpr (Op == reduce_op::bor) return static_cast<T>(x | y);
      else return static_cast<T>(x ^ y);
    } else {
      const C x = detail::widen(a), y = detail::widen(b);
      C r;
      if constexpr (Op == reduce_op::sum || Op == reduce_op::avg) r = x + y;
      else if constexpr (Op == reduce_op::prod) r = x * y;
      // NaN propagates: a comparison with NaN is false, so pick the NaN side.
      else if constexpr (Op == reduce_op::min) r = (y < x || y != y) ? y : x;
      else r = (x < y || y != y) ? y : x;
      if constexpr (std::is_same_v<C, T>) return r;
      else return detail::narrow<T>(r);
    }
  }

  COLLX_HOST_DEVICE COLLX_ALWAYS_INLINE T post(T v) const {
    if constexpr (!has_post) {
      return v;
    } else if constexpr (std::is_integral_v<T>) {
      // The divisor need not fit in T (256 ranks of int8): divide in 64 bits.
      using W = std::conditional_t<std::is_signed_v<T>, std::int64_t, std::uint64_t>;
      return static_cast<T>(static_cast<W>(v) / static_cast<W>(nranks));
    } else {
      return detail::narrow<T>(detail::widen(v) / static_cast<C>(nranks));
    }
  }
};

/// A reduction fixed at compile time: `collx::ops::sum` and its siblings.
/// Passed where a reduce_op is taken it converts to one, so every call accepts
/// it; a caller that compiles a kernel per operator (gpu::communicator) then
/// compiles only this operator's, where a runtime reduce_op makes it compile
/// one per operator the element type supports.
template <reduce_op Op>
using static_reduce_op = std::integral_constant<reduce_op, Op>;

namespace ops {
inline constexpr static_reduce_op<reduce_op::sum> sum{};
inline constexpr static_reduce_op<reduce_op::prod> prod{};
inline constexpr static_reduce_op<reduce_op::min> min{};
inline constexpr static_reduce_op<reduce_op::max> max{};
inline constexpr static_reduce_op<reduce_op::avg> avg{};
inline constexpr static_reduce_op<reduce_op::band> band{};
inline constexpr static_reduce_op<reduce_op::bor> bor{};
inline constexpr static_reduce_op<reduce_op::bxor> bxor{};
}  // namespace ops

namespace detail {
template <class O>
inline constexpr bool is_static_reduce_op = false;
template <reduce_op Op>
inline constexpr bool is_static_reduce_op<static_reduce_op<Op>> = true;
}  // namespace detail

/// A reduction argument: a runtime reduce_op or a static_reduce_op.
template <class O>
concept reduce_op_argument = std::is_same_v<O, reduce_op> || detail::is_static_reduce_op<O>;

/// Calls f(std::integral_constant<reduce_op, Op>{}) for a runtime op.
template <class F>
constexpr bool visit_reduce_op(reduce_op op, F&& f) {
  switch (op) {
#define COLLX_VISIT(O) \
  case reduce_op::O: f(std::integral_constant<reduce_op, reduce_op::O>{}); return true;
    COLLX_VISIT(sum)
    COLLX_VISIT(prod)
    COLLX_VISIT(min) COLLX_VISIT(max) COLLX_VISIT(avg) COLLX_VISIT(band) COLLX_VISIT(bor) COLLX_VISIT(bxor)
#undef COLLX_VISIT
  }
  return false;
}

/// The same for an op fixed at compile time: f is instantiated for it alone.
template <reduce_op Op, class F>
constexpr bool visit_reduce_op(static_reduce_op<Op> op, F&& f) {
  f(op);
  return true;
}

}  // namespace collx
