// collx/type_list.hpp — a list of types, for the compiled policy sets.
#pragma once

#include <type_traits>

namespace collx {

template <class... Ts>
struct type_list {
  static constexpr int size = sizeof...(Ts);
};

/// Position of T in L (a compile error if T is not in L).
template <class T, class L>
struct index_in;
template <class T, class... Ts>
struct index_in<T, type_list<Ts...>> {
  static constexpr int value = [] {
    int i = 0, found = -1;
    ((found = (found < 0 && std::is_same_v<T, Ts>) ? i : found, ++i), ...);
    return found;
  }();
  static_assert(value >= 0, "the type is not in the list");
};

}  // namespace collx
