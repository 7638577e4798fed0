// collx/detail/reduce_copy.hpp — the element loop under every primitive.
//
// d0[i] (and d1[i] when NDst == 2) = post?(a[i] ⊕ b[i]) or copies of a[i],
// for the elements of [0, n) owned by this worker of the group. Written as
// plain indexed loops so host compilers vectorize them; a may alias d0
// (in-place operation), which is why no pointer is declared restrict.
#pragma once

#include <collx/config.hpp>

#include <cstddef>
#include <cstring>
#include <type_traits>

namespace collx::detail {

/// A group known at compile time to be one worker (exec::host's); groups
/// whose size is a run-time value (a block, a host team) are not.
template <class Group>
inline constexpr bool single_worker = requires {
  requires Group::size() == 1;
};

template <bool Reduce, bool Post, int NDst, class Group, class T, class Red>
COLLX_HOST_DEVICE COLLX_ALWAYS_INLINE void reduce_copy(const Group& g, const T* a,
                                                       std::type_identity_t<const T*> b, T* d0,
                                                       std::type_identity_t<T*> d1, std::size_t n,
                                                       const Red& red) {
  static_assert(NDst == 1 || NDst == 2);
#if !COLLX_DEVICE_CODE
  if constexpr (!Reduce && !Post && single_worker<Group>) {
    // A plain host copy: the C library's memcpy picks the widest moves the CPU has.
    if (d0 != a) std::memcpy(d0, a, n * sizeof(T));
    if constexpr (NDst == 2) std::memcpy(d1, a, n * sizeof(T));
    return;
  } else if constexpr (requires { Red::is_erased; }) {
    // The whole slice goes to a kernel typed for the real element type.
    static_assert(single_worker<Group>, "the erased reducer serves single-thread host workers");
    red.template apply<Reduce, Post, NDst>(a, b, d0, d1, n);
    return;
  } else
#endif
  {
    const std::size_t stride = static_cast<std::size_t>(g.size());
    for (std::size_t i = static_cast<std::size_t>(g.index()); i < n; i += stride) {
      T v = a[i];
      if constexpr (Reduce) v = red(v, b[i]);
      if constexpr (Post) v = red.post(v);
      d0[i] = v;
      if constexpr (NDst == 2) d1[i] = v;
    }
  }
}

}  // namespace collx::detail
