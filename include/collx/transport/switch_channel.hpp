// collx/transport/switch_channel.hpp — a switch channel emulated with loads
// and stores of peers' registered buffers.
//
// An NVSwitch offers two operations on a multicast address that maps every
// rank's registered buffer: a load-reduce (one load returns the element
// reduced over all ranks' copies) and a store (one store writes every copy).
// Algorithms that need them (needs_multicast, e.g. algo::nvls) are written
// against these two calls only. A transport whose ranks load and store each
// other's buffers (peer_buffer_access) offers the same two calls by P loads
// and P stores, which is this type; a GPU transport with multicast objects
// implements them with multimem instructions instead.
//
// Memory ordering: none of its own. Both calls touch peers' buffers, so they
// belong between two barriers (prims::barrier), which order them against
// every rank's earlier and later accesses. Each call ends with a group sync.
#pragma once

#include <collx/config.hpp>
#include <collx/detail/reduce_copy.hpp>

#include <cstddef>

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

}  // namespace collx::transport
