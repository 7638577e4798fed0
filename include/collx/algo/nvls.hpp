// collx/algo/nvls.hpp — the multicast (NVLS-style) model on peer memory.
//
// NVLink SHARP gives every GPU a multicast address: one load-reduce fetches a
// value reduced over all GPUs' copies, one store writes all copies. This
// algorithm is that model written against the peer-memory primitives (every
// rank loads and stores every rank's registered buffer, prims.buffer(q)):
//
//   all_reduce      each rank copies its input into its buffer; barrier; rank r
//                   load-reduces slice r over all buffers (in rank order) and
//                   stores the result into slice r of every buffer; barrier;
//                   each rank copies its buffer to recv.
//   reduce_scatter  each rank copies its P input blocks into its buffer;
//                   barrier; rank r load-reduces block r over all buffers into
//                   recv; barrier.
//   all_gather      each rank copies its block into its buffer; barrier; each
//                   rank loads every rank's block into recv; barrier.
//
// The rule that makes back-to-back calls safe: a rank touches peers' buffers
// only between the two barriers of a segment, and its own buffer otherwise.
// The second barrier then lets the next segment, or the next collective (which
// may use the buffer as scratch), overwrite a buffer while ranks still
// finishing the previous call read only their own. (So all_gather loads from
// peers rather than storing into them before its first barrier, which would
// race with a peer still copying out its previous result.) Data larger than a
// buffer goes in segments (all_reduce, all_gather: buffer_elems(); reduce_scatter:
// buffer_elems()/P per block). Barriers wait with the executor's deadline and
// abort checks.
//
// Device: the same code runs in a kernel as plain loads/stores through peer
// pointers of the mapped segment; multimem (multicast object) instructions are
// not used here.
//
// Determinism: each element is reduced once, by the rank owning its slice, in
// rank order; everyone else copies the result. all_reduce results are bitwise
// identical on every rank and across calls.
#pragma once

#include <collx/algo/ids.hpp>
#include <collx/coll.hpp>
#include <collx/config.hpp>
#include <collx/error.hpp>
#include <collx/prims.hpp>

#include <cstddef>

namespace collx::algo {

struct nvls {
  static constexpr algo_id id = algo_id::nvls;
  static constexpr const char* name = "nvls";
  static constexpr bool deterministic = true;
  /// Moves data by loads and stores of peers' buffers, not through connections.
  static constexpr bool uses_peer_memory = true;

  COLLX_HOST_DEVICE static constexpr bool implements(coll c) {
    return c == coll::all_reduce || c == coll::reduce_scatter || c == coll::all_gather;
  }

  /// α-β-γ terms for `bytes` on P ranks, for data that fits the buffers (one
  /// segment). steps: barriers (each costs one all-to-all latency);
  /// bytes_sent: bytes this rank loads from or stores to peers' buffers;
  /// bytes_reduced: bytes it combines. The same for every rank.
  struct cost_terms {
    double steps, bytes_sent, bytes_reduced;
  };
  COLLX_HOST_DEVICE static constexpr cost_terms cost(coll c, int P, double bytes) {
    if (P <= 1 || !implements(c)) return {0, 0, 0};
    const double f = double(P - 1) / P;
    switch (c) {
      case coll::all_reduce: return {2, 2 * f * bytes, f * bytes};
      case coll::reduce_scatter: return {2, f * bytes, f * bytes};
      default: return {2, f * bytes, 0};
    }
  }

  template <coll C, class Prims, class T>
  COLLX_HOST_DEVICE static status run(Prims& p, const schedule_args<T>& a) {
    // Dispatch folds may instantiate every collective; only implemented ones are reached.
    if constexpr (C == coll::all_reduce) return all_reduce(p, a);
    else if constexpr (C == coll::reduce_scatter) return reduce_scatter(p, a);
    else if constexpr (C == coll::all_gather) return all_gather(p, a);
    else return status::not_supported;
  }

 private:
  template <class Prims, class T>
  COLLX_HOST_DEVICE static status all_reduce(Prims& p, const schedule_args<T>& a) {
    const int P = a.nranks, r = a.rank;
    if (P == 1) return p.local_copy(a.send, a.recv, a.count, true);
    T* mine = p.buffer(r);
    const std::size_t seg = p.buffer_elems(), Pz = static_cast<std::size_t>(P);
    for (std::size_t so = 0; so < a.count; so += seg) {
      const std::size_t m = a.count - so < seg ? a.count - so : seg;
      const std::size_t lo = m * static_cast<std::size_t>(r) / Pz,
                        hi = m * static_cast<std::size_t>(r + 1) / Pz;
      COLLX_TRY(p.local_copy(a.send + so, mine, m, false));
      COLLX_TRY(p.barrier());
      const int last = r == P - 1 ? P - 2 : P - 1;
      for (int q = 0; q < P; ++q)
        if (q != r) COLLX_TRY(p.local_reduce(mine + lo, p.buffer(q) + lo, mine + lo, hi - lo, q == last));
      for (int q = 0; q < P; ++q)
        if (q != r) COLLX_TRY(p.local_copy(mine + lo, p.buffer(q) + lo, hi - lo, false));
      COLLX_TRY(p.barrier());
      COLLX_TRY(p.local_copy(mine, a.recv + so, m, false));
    }
    return status::ok;
  }

  template <class Prims, class T>
  COLLX_HOST_DEVICE static status reduce_scatter(Prims& p, const schedule_args<T>& a) {
    const int P = a.nranks, r = a.rank;
    const std::size_t c = a.count, Pz = static_cast<std::size_t>(P), rz = static_cast<std::size_t>(r);
    if (P == 1) return p.local_copy(a.send, a.recv, c, true);
    T* mine = p.buffer(r);
    const std::size_t seg = p.buffer_elems() / Pz;  // ≥ 1: buffers hold ≥ 1 MiB, P ≤ 4096
    for (std::size_t so = 0; so < c; so += seg) {
      const std::size_t m = c - so < seg ? c - so : seg;
      for (std::size_t q = 0; q < Pz; ++q)
        COLLX_TRY(p.local_copy(a.send + q * c + so, mine + q * m, m, false));
      COLLX_TRY(p.barrier());
      T* out = a.recv + so;
      COLLX_TRY(p.local_reduce(p.buffer(0) + rz * m, p.buffer(1) + rz * m, out, m, P == 2));
      for (int q = 2; q < P; ++q) COLLX_TRY(p.local_reduce(out, p.buffer(q) + rz * m, out, m, q == P - 1));
      COLLX_TRY(p.barrier());
    }
    return status::ok;
  }

  template <class Prims, class T>
  COLLX_HOST_DEVICE static status all_gather(Prims& p, const schedule_args<T>& a) {
    const int P = a.nranks, r = a.rank;
    const std::size_t c = a.count;
    if (P == 1) return p.local_copy(a.send, a.recv, c, false);
    const std::size_t seg = p.buffer_elems();
    for (std::size_t so = 0; so < c; so += seg) {
      const std::size_t m = c - so < seg ? c - so : seg;
      COLLX_TRY(p.local_copy(a.send + so, p.buffer(r), m, false));
      COLLX_TRY(p.barrier());
      for (int q = 0; q < P; ++q)
        COLLX_TRY(p.local_copy(p.buffer(q), a.recv + static_cast<std::size_t>(q) * c + so, m, false));
      COLLX_TRY(p.barrier());
    }
    return status::ok;
  }
};

}  // namespace collx::algo
