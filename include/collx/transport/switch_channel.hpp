// collx/transport/switch_channel.hpp — a switch channel emulated with loads
// and stores of peers' registered buffers.
//
// An NVSwitch offers two operations on a multicast address that maps every
// rank's registered buffer: a load-reduce (one load returns the element
// reduced over all ranks' copies) and a store (one store writes every copy).
// Algorithms that need them (needs_multicast, e.g. algo::nvls) are written
// against these two calls only. A transport whose ranks load and store each
// other's buffers (peer_buffer_access) offers the same two calls by P loads
// and P stores, which is peer_switch_channel; where the view also has a
// multicast address over those buffers (a GPU group on NVSwitch with
// multicast objects), multicast_switch_channel asks the switch instead: one
// multimem instruction per 16-byte pack (transport/multimem.hpp).
//
// Memory ordering: none of its own. Both calls touch peers' buffers, so they
// belong between two barriers (prims::barrier), which order them against
// every rank's earlier and later accesses. Each call ends with a group sync.
#pragma once

#include <collx/config.hpp>
#include <collx/detail/reduce_copy.hpp>
#include <collx/transport/multimem.hpp>

#include <cstddef>
#include <cstdint>

namespace collx::transport {

/// View: provides peer_buffer(q) (every rank's registered buffer) and nranks().
template <class View>
struct peer_switch_channel {
  const View& view;
  int rank;

  /// dst[0, n) ← ⊕ over every rank q of q's buffer [off, off + n) (elements of
  /// T), post() applied if `finish`. This rank's copy comes first, then ranks
  /// rank+1, rank+2, … mod P: a fixed order per (rank, P). dst may be this
  /// rank's own buffer at the same offset (it is read before it is written),
  /// but no other rank's.
  template <class Group, class T, class Red>
  COLLX_HOST_DEVICE void load_reduce(const Group& g, std::size_t off, T* dst, std::size_t n, const Red& red,
                                     bool finish) const {
    const int P = view.nranks();
    if (P == 1 && at<T>(rank) + off == dst && !(finish && Red::has_post)) return g.sync();
    // Every copy of an element loaded before any is combined (one round trip
    // to the peers per element on a GPU), reduce_many_max copies per pass,
    // later passes continuing from dst.
    int k = 0;
    while (k < P) {
      const T* src[detail::reduce_many_max];
      int m = 0;
      if (k > 0) src[m++] = dst;
      for (; m < detail::reduce_many_max && k < P; ++m, ++k) src[m] = at<T>((rank + k) % P) + off;
      if (finish && k == P && Red::has_post) detail::reduce_many<true>(g, src, m, dst, n, red);
      else detail::reduce_many<false>(g, src, m, dst, n, red);
      if (k < P) g.sync();
    }
    g.sync();
  }

  /// Every rank's buffer [off, off + n) ← src[0, n) (src may be this rank's
  /// own buffer at that offset, which is then left as it is).
  template <class Group, class T, class Red>
  COLLX_HOST_DEVICE void store(const Group& g, std::size_t off, const T* src, std::size_t n,
                               const Red& red) const {
    const int P = view.nranks();
    for (int k = 0; k < P; ++k) {
      T* d = at<T>((rank + k) % P) + off;
      if (d != src) detail::reduce_copy<false, false, 1>(g, src, nullptr, d, nullptr, n, red);
    }
    g.sync();
  }

 private:
  template <class T>
  COLLX_HOST_DEVICE T* at(int q) const {
    return reinterpret_cast<T*>(view.peer_buffer(q));
  }
};

/// The switch channel of a view that may have a multicast address
/// (View::multicast: offset 0 stands for offset 0 of every rank's
/// peer_buffer(), null where the group has none). The 16-byte packs of a
/// range whose multicast address and local pointer share their offset from a
/// 16-byte boundary go through the switch, one multimem instruction each,
/// where it performs Red's reduction of T (multimem_reduces); the elements
/// before the first such pack and after the last, and everything else, go
/// through peer_switch_channel. Results are the same on every rank; their
/// bits may differ from the peer channel's in the last place for floating
/// types (the switch's order of combination is its own, and it accumulates
/// half types in f32).
///
/// Host code (no multicast instruction): a non-null View::multicast is
/// emulated by translating each multicast address back into every rank's
/// buffer, so the team executor runs the same split and addressing on CPUs.
template <class View>
struct multicast_switch_channel {
  const View& view;
  int rank;

  /// As peer_switch_channel::load_reduce.
  template <class Group, class T, class Red>
  COLLX_HOST_DEVICE void load_reduce(const Group& g, std::size_t off, T* dst, std::size_t n, const Red& red,
                                     bool finish) const {
    const peer_switch_channel<View> peers{view, rank};
    if constexpr (!reduces_here<T, Red>()) {
      peers.load_reduce(g, off, dst, n, red, finish);
    } else {
      const span s = split<T>(off, dst, n);
      if (s.packs == 0) return peers.load_reduce(g, off, dst, n, red, finish);
      if (s.head > 0) peers.load_reduce(g, off, dst, s.head, red, finish);
      using P = detail::pack<T>;
      constexpr int unroll = 4;
      const std::size_t W = static_cast<std::size_t>(g.size()), me = static_cast<std::size_t>(g.index());
      P* out = reinterpret_cast<P*>(dst + s.head);
      auto finished = [&](P x) {
        if (finish && Red::has_post) {
          COLLX_UNROLL
          for (std::size_t e = 0; e < detail::pack_elems<T>; ++e) x.v[e] = red.post(x.v[e]);
        }
        return x;
      };
      // Several switch loads in flight per thread before the stores.
      std::size_t k = me;
      for (; k + (unroll - 1) * W < s.packs; k += unroll * W) {
        P x[unroll];
        COLLX_UNROLL
        for (int u = 0; u < unroll; ++u) x[u] = switch_load<T>(s.address + 16 * (k + u * W), red);
        COLLX_UNROLL
        for (int u = 0; u < unroll; ++u) out[k + u * W] = finished(x[u]);
      }
      for (; k < s.packs; k += W) out[k] = finished(switch_load<T>(s.address + 16 * k, red));
      g.sync();
      const std::size_t end = s.head + s.packs * detail::pack_elems<T>;
      if (end < n) peers.load_reduce(g, off + end, dst + end, n - end, red, finish);
    }
  }

  /// As peer_switch_channel::store (the switch also writes this rank's copy,
  /// which holds the same values where src is that copy).
  template <class Group, class T, class Red>
  COLLX_HOST_DEVICE void store(const Group& g, std::size_t off, const T* src, std::size_t n,
                               const Red& red) const {
    const peer_switch_channel<View> peers{view, rank};
    if constexpr (!stores_here<T>()) {
      peers.store(g, off, src, n, red);
    } else {
      const span s = split<T>(off, src, n);
      if (s.packs == 0) return peers.store(g, off, src, n, red);
      if (s.head > 0) peers.store(g, off, src, s.head, red);
      using P = detail::pack<T>;
      const P* in = reinterpret_cast<const P*>(src + s.head);
      const std::size_t W = static_cast<std::size_t>(g.size()), me = static_cast<std::size_t>(g.index());
      for (std::size_t k = me; k < s.packs; k += W) switch_store<T>(s.address + 16 * k, in[k]);
      g.sync();
      const std::size_t end = s.head + s.packs * detail::pack_elems<T>;
      if (end < n) peers.store(g, off + end, src + end, n - end, red);
    }
  }

  /// Where the packs of [off, off + n) start: `head` elements before the
  /// first, `packs` of them from multicast address `address` (0 packs: none
  /// go through the switch).
  struct span {
    std::size_t head = 0;
    std::size_t packs = 0;
    std::uintptr_t address = 0;
  };
  template <class T>
  COLLX_HOST_DEVICE span split(std::size_t off, const T* local, std::size_t n) const {
    constexpr std::size_t V = detail::pack_elems<T>;
    if (V == 0 || view.multicast == nullptr || view.nranks() < 2) return {};
    const std::uintptr_t a = reinterpret_cast<std::uintptr_t>(view.multicast) + off * sizeof(T);
    if (a % 16 != detail::pack_offset(local) || a % sizeof(T) != 0) return {};
    const std::size_t head = (16 - a % 16) % 16 / sizeof(T);
    if (n < head + V) return {};
    return {head, (n - head) / V, a + head * sizeof(T)};
  }

 private:
  template <class T, class Red>
  COLLX_HOST_DEVICE static constexpr bool reduces_here() {
#if COLLX_DEVICE_CODE
    return COLLX_MULTIMEM_PTX && multimem_reduces<T, Red>;
#else
    return multimem_reduces<T, Red>;
#endif
  }
  template <class T>
  COLLX_HOST_DEVICE static constexpr bool stores_here() {
#if COLLX_DEVICE_CODE
    return COLLX_MULTIMEM_PTX && detail::pack_elems<T> != 0;
#else
    return detail::pack_elems<T> != 0;
#endif
  }

  template <class T, class Red>
  COLLX_HOST_DEVICE COLLX_ALWAYS_INLINE detail::pack<T> switch_load(std::uintptr_t a, const Red& red) const {
#if COLLX_DEVICE_CODE
#if COLLX_MULTIMEM_PTX
    (void)red;
    return multimem_load_reduce<T, Red>(a);
#else
    (void)a, (void)red;
    return {};         // not reached: reduces_here() is false
#endif
#else
    // Every rank's copy, combined in rank order (the switch's order is its own).
    detail::pack<T> r = *copy<T>(a, 0);
    for (int q = 1; q < view.nranks(); ++q) {
      const detail::pack<T> y = *copy<T>(a, q);
      for (std::size_t e = 0; e < detail::pack_elems<T>; ++e) r.v[e] = red(r.v[e], y.v[e]);
    }
    return r;
#endif
  }
  template <class T>
  COLLX_HOST_DEVICE COLLX_ALWAYS_INLINE void switch_store(std::uintptr_t a, const detail::pack<T>& p) const {
#if COLLX_DEVICE_CODE
#if COLLX_MULTIMEM_PTX
    multimem_store<T>(a, p);
#else
    (void)a, (void)p;  // not reached: stores_here() is false
#endif
#else
    for (int q = 0; q < view.nranks(); ++q) *copy<T>(a, q) = p;
#endif
  }
#if !COLLX_DEVICE_CODE
  /// Rank q's copy of the pack at multicast address a (host emulation).
  template <class T>
  detail::pack<T>* copy(std::uintptr_t a, int q) const {
    return reinterpret_cast<detail::pack<T>*>(view.peer_buffer(q) +
                                              (a - reinterpret_cast<std::uintptr_t>(view.multicast)));
  }
#endif
};

}  // namespace collx::transport
