// collx/detail/enum_set.hpp — a set of enumerators of a small enum, one bit
// each, usable as a template argument (a structural type).
#pragma once

#include <concepts>
#include <cstdint>

namespace collx::detail {

/// Enumerators 0 … N-1 of E; N ≤ 32. An aggregate (nvcc passes class-type
/// template arguments to the host compiler as aggregate initialisers), so
/// made with of(…) or all().
template <class E, int N>
struct enum_set {
  static_assert(N > 0 && N <= 32, "enum_set holds at most 32 enumerators");
  std::uint32_t bits = 0;

  /// The set of `members`; values outside 0 … N-1 are left out.
  static constexpr enum_set of(std::same_as<E> auto... members) {
    enum_set s;
    ((s.bits |= in_range(members) ? 1u << static_cast<unsigned>(members) : 0u), ...);
    return s;
  }
  static constexpr enum_set all() { return enum_set{N == 32 ? ~0u : (1u << N) - 1}; }
  constexpr bool contains(E e) const { return in_range(e) && ((bits >> static_cast<unsigned>(e)) & 1u) != 0; }
  constexpr bool operator==(const enum_set&) const = default;

  static constexpr bool in_range(E e) { return static_cast<unsigned>(e) < static_cast<unsigned>(N); }
};

}  // namespace collx::detail
