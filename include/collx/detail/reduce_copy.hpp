// collx/detail/reduce_copy.hpp — the element loop under every primitive.
//
// d0[i] (and d1[i] when NDst == 2) = post?(a[i] ⊕ b[i]) or copies of a[i],
// for the elements of [0, n) owned by this worker of the group. A one-worker
// host group copies with memcpy or hands the slice to a typed kernel; groups
// of several workers (a GPU block, a host team) move 16-byte packs where the
// pointers' alignment allows. a may alias d0 (in-place operation), which is
// why no pointer is declared restrict.
#pragma once

#include <collx/config.hpp>
#include <collx/numeric/hardware.hpp>
#include <collx/reduce_op.hpp>

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace collx::detail {

/// A group known at compile time to be one worker (exec::host's); groups
/// whose size is a run-time value (a block, a host team) are not.
template <class Group>
inline constexpr bool single_worker = requires {
  requires Group::size()
  == 1;
};

/// Elements of T in one 16-byte pack (0: T does not tile 16 bytes).
template <class T>
inline constexpr std::size_t pack_elems = sizeof(T) <= 16 && 16 % sizeof(T) == 0 ? 16 / sizeof(T) : 0;

/// Bytes from the last 16-byte boundary: pointers with the same offset move
/// in packs together.
COLLX_HOST_DEVICE COLLX_ALWAYS_INLINE std::uintptr_t pack_offset(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p) % 16;
}

/// 16 bytes of T, moved by one vector access on a GPU (ld/st.global.v4).
template <class T>
struct alignas(16) pack {
  T v[pack_elems<T>];
};

/// Whether Red's combination of two packs of T may run two elements per
/// instruction: half and bfloat16 summed (sum, avg) or multiplied. Device
/// code does where the GPU has the instruction (collx/numeric/hardware.hpp,
/// lowp::hw::pairs); the host combines element by element.
template <class Red, class T>
inline constexpr bool combines_pairs = false;
template <class Red, class T>
  requires requires {
    typename T::format;
    { Red::op } -> std::convertible_to<reduce_op>;
  }
inline constexpr bool combines_pairs<Red, T> =
    ((T::format::exp_bits == 5 && T::format::mant == 10) ||
     (T::format::exp_bits == 8 && T::format::mant == 7)) &&
    (Red::op == reduce_op::sum || Red::op == reduce_op::avg || Red::op == reduce_op::prod);

#if COLLX_DEVICE_CODE
/// Whether this GPU has the packed instruction combines_pairs asks for.
template <class Red, class T>
COLLX_HOST_DEVICE constexpr bool pairs_here() {
  if constexpr (combines_pairs<Red, T>) return lowp::hw::pairs<typename T::format>;
  else return false;
}
#endif

/// x ← x ⊕ y over one 16-byte pack (before any post()).
template <class Red, class T>
COLLX_HOST_DEVICE COLLX_ALWAYS_INLINE void combine_pack(const Red& red, pack<T>& x, const pack<T>& y) {
#if COLLX_DEVICE_CODE
  if constexpr (pairs_here<Red, T>()) {
    static_assert(sizeof(pack<T>) == 16);
    struct words {
      std::uint32_t w[4];
    };
    words a = __builtin_bit_cast(words, x);
    const words b = __builtin_bit_cast(words, y);
    COLLX_UNROLL
    for (int i = 0; i < 4; ++i)
      a.w[i] = lowp::hw::combine_pairs<typename T::format, Red::op == reduce_op::prod>(a.w[i], b.w[i]);
    x = __builtin_bit_cast(pack<T>, a);
  } else
#endif
  {
    COLLX_UNROLL
    for (std::size_t e = 0; e < pack_elems<T>; ++e) x.v[e] = red(x.v[e], y.v[e]);
  }
}

/// The loop of a worker group (a GPU block, a host team): elements are dealt
/// round-robin to the workers. Where every pointer has the same offset from a
/// 16-byte boundary, the middle of the range moves in 16-byte packs, Unroll
/// packs per worker per round with all loads issued before the stores (several
/// accesses in flight per thread); the unaligned head and the tail, and
/// pointers of different offsets, go element by element.
template <bool Reduce, bool Post, int NDst, int Unroll = 4, class Group, class T, class Red>
COLLX_HOST_DEVICE COLLX_ALWAYS_INLINE void reduce_copy_packed(const Group& g, const T* a, const T* b, T* d0,
                                                              T* d1, std::size_t n, const Red& red) {
  const std::size_t workers = static_cast<std::size_t>(g.size()), me = static_cast<std::size_t>(g.index());
  auto scalar = [&](std::size_t lo, std::size_t hi) {
    for (std::size_t i = lo + me; i < hi; i += workers) {
      T v = a[i];
      if constexpr (Reduce) v = red(v, b[i]);
      if constexpr (Post) v = red.post(v);
      d0[i] = v;
      if constexpr (NDst == 2) d1[i] = v;
    }
  };
  constexpr std::size_t V = pack_elems<T>;
  if constexpr (V < 2) {
    scalar(0, n);
  } else {
    const std::uintptr_t o = pack_offset(a);
    const bool same =
        pack_offset(d0) == o && (!Reduce || pack_offset(b) == o) && (NDst == 1 || pack_offset(d1) == o);
    if (!same || o % sizeof(T) != 0 || n < 2 * V) {
      scalar(0, n);
      return;
    }
    const std::size_t head = o == 0 ? 0 : (16 - o) / sizeof(T);
    const std::size_t packs = (n - head) / V, body_end = head + packs * V;
    using P = pack<T>;
    const P* pa = reinterpret_cast<const P*>(a + head);
    const P* pb = reinterpret_cast<const P*>(b + (Reduce ? head : 0));
    P* p0 = reinterpret_cast<P*>(d0 + head);
    P* p1 = reinterpret_cast<P*>(d1 + (NDst == 2 ? head : 0));
    auto op = [&](P x, const P& y) {
      if constexpr (Reduce) combine_pack(red, x, y);
      if constexpr (Post) {
        COLLX_UNROLL
        for (std::size_t e = 0; e < V; ++e) x.v[e] = red.post(x.v[e]);
      }
      return x;
    };
    const std::size_t round = workers * Unroll;
    std::size_t k = me;
    for (; k + (Unroll - 1) * workers < packs; k += round) {
      P x[Unroll], y[Unroll];
      COLLX_UNROLL
      for (int u = 0; u < Unroll; ++u) {
        x[u] = pa[k + u * workers];
        if constexpr (Reduce) y[u] = pb[k + u * workers];
      }
      COLLX_UNROLL
      for (int u = 0; u < Unroll; ++u) {
        const P r = op(x[u], y[u]);
        p0[k + u * workers] = r;
        if constexpr (NDst == 2) p1[k + u * workers] = r;
      }
    }
    for (; k < packs; k += workers) {
      P y{};
      if constexpr (Reduce) y = pb[k];
      const P r = op(pa[k], y);
      p0[k] = r;
      if constexpr (NDst == 2) p1[k] = r;
    }
    scalar(0, head);
    scalar(body_end, n);
  }
}

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
    reduce_copy_packed<Reduce, Post, NDst>(g, a, b, d0, d1, n, red);
  }
}
/// Most sources reduce_many combines in one pass.
inline constexpr int reduce_many_max = 8;

/// The loop of a worker group for reduce_many: every source of an element is
/// loaded before any is combined, so a GPU thread has all of its loads from
/// peers in flight at once (one round trip per pack instead of one per
/// source), Unroll packs per worker per round.
template <bool Post, int Unroll = 2, class Group, class T, class Red>
COLLX_HOST_DEVICE COLLX_ALWAYS_INLINE void reduce_many_packed(const Group& g, const T* const* src, int nsrc,
                                                              T* d, std::size_t n, const Red& red) {
  const std::size_t workers = static_cast<std::size_t>(g.size()), me = static_cast<std::size_t>(g.index());
  auto scalar = [&](std::size_t lo, std::size_t hi) {
    for (std::size_t i = lo + me; i < hi; i += workers) {
      T v = src[0][i];
      for (int k = 1; k < nsrc; ++k) v = red(v, src[k][i]);
      if constexpr (Post) v = red.post(v);
      d[i] = v;
    }
  };
  constexpr std::size_t V = pack_elems<T>;
  if constexpr (V < 2) {
    scalar(0, n);
  } else {
    const std::uintptr_t o = pack_offset(d);
    bool same = o % sizeof(T) == 0 && n >= 2 * V;
    for (int k = 0; k < nsrc; ++k) same = same && pack_offset(src[k]) == o;
    if (!same) {
      scalar(0, n);
      return;
    }
    const std::size_t head = o == 0 ? 0 : (16 - o) / sizeof(T);
    const std::size_t packs = (n - head) / V, body_end = head + packs * V;
    using P = pack<T>;
    const P* ps[reduce_many_max];
    COLLX_UNROLL
    for (int k = 0; k < reduce_many_max; ++k)
      ps[k] = reinterpret_cast<const P*>(src[k < nsrc ? k : 0] + head);
    P* pd = reinterpret_cast<P*>(d + head);
    auto finish = [&](P& x) {
      if constexpr (Post) {
        COLLX_UNROLL
        for (std::size_t e = 0; e < V; ++e) x.v[e] = red.post(x.v[e]);
      }
    };
    const std::size_t round = workers * Unroll;
    std::size_t i = me;
    for (; i + (Unroll - 1) * workers < packs; i += round) {
      P x[Unroll][reduce_many_max]{};  // zeros: sources past nsrc are never loaded
      COLLX_UNROLL
      for (int u = 0; u < Unroll; ++u) {
        COLLX_UNROLL
        for (int k = 0; k < reduce_many_max; ++k)
          if (k < nsrc) x[u][k] = ps[k][i + u * workers];
      }
      COLLX_UNROLL
      for (int u = 0; u < Unroll; ++u) {
        COLLX_UNROLL
        for (int k = 1; k < reduce_many_max; ++k)
          if (k < nsrc) combine_pack(red, x[u][0], x[u][k]);
        finish(x[u][0]);
        pd[i + u * workers] = x[u][0];
      }
    }
    for (; i < packs; i += workers) {
      P x[reduce_many_max]{};
      COLLX_UNROLL
      for (int k = 0; k < reduce_many_max; ++k)
        if (k < nsrc) x[k] = ps[k][i];
      COLLX_UNROLL
      for (int k = 1; k < reduce_many_max; ++k)
        if (k < nsrc) combine_pack(red, x[0], x[k]);
      finish(x[0]);
      pd[i] = x[0];
    }
    scalar(0, head);
    scalar(body_end, n);
  }
}

/// d[i] = post?(src[0][i] ⊕ src[1][i] ⊕ … ⊕ src[nsrc-1][i]), combined left to
/// right (the bits of a chain of pairwise reduce_copy calls), for the
/// elements of [0, n) this worker owns; 1 <= nsrc <= reduce_many_max. d may
/// alias src[0] only. A one-worker host group runs the chain itself (the
/// erased reducer's kernels are pairwise), in place in d after the first step.
template <bool Post, class Group, class T, class Red>
COLLX_HOST_DEVICE COLLX_ALWAYS_INLINE void reduce_many(const Group& g, const T* const* src, int nsrc, T* d,
                                                       std::size_t n, const Red& red) {
#if !COLLX_DEVICE_CODE
  if constexpr (single_worker<Group>) {
    if (nsrc == 1) {
      reduce_copy<false, Post, 1>(g, src[0], nullptr, d, nullptr, n, red);
      return;
    }
    for (int k = 1; k < nsrc; ++k) {
      const T* a = k == 1 ? src[0] : d;
      if (Post && k == nsrc - 1) reduce_copy<true, Post, 1>(g, a, src[k], d, nullptr, n, red);
      else reduce_copy<true, false, 1>(g, a, src[k], d, nullptr, n, red);
    }
    return;
  } else
#endif
  {
    reduce_many_packed<Post>(g, src, nsrc, d, n, red);
  }
}
}  // namespace collx::detail
