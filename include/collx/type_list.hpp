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

/// The types of L for which Keep<T>::value is true, in order.
template <template <class> class Keep, class L>
struct filter;
template <template <class> class Keep>
struct filter<Keep, type_list<>> {
  using type = type_list<>;
};
template <template <class> class Keep, class T, class... Ts>
struct filter<Keep, type_list<T, Ts...>> {
 private:
  template <class... Us>
  static type_list<T, Us...> prepend(type_list<Us...>);

 public:
  using rest = typename filter<Keep, type_list<Ts...>>::type;
  using type = std::conditional_t<Keep<T>::value, decltype(prepend(rest{})), rest>;
};
template <template <class> class Keep, class L>
using filter_t = typename filter<Keep, L>::type;

}  // namespace collx
