// collx/algo/nvls.hpp — the multicast (NVLS-style) model on peer memory.
//
// NVLink SHARP gives every GPU a multicast address: one load-reduce fetches a
// value reduced over all GPUs' copies, one store writes all copies. This
// algorithm is that model written against the peer-memory primitives (every
// rank loads and stores every rank's registered buffer, prims.buffer(q)):
//
//   all_reduce      each rank copies its input into its buffer; barrier; rank r
//                   multicast-load-reduces slice r over all buffers and
//                   multicast-stores the result into slice r of every buffer;
//                   barrier; each rank copies its buffer to recv.
//   reduce_scatter  each rank copies its P input blocks into its buffer;
//                   barrier; rank r multicast-load-reduces block r over all
//                   buffers into recv; barrier.
//
// The two multicast operations are a switch channel's (prims::mc_load_reduce,
// mc_store; needs_multicast): the shm transport performs them with P loads
// and P stores (transport/switch_channel.hpp), a GPU transport with
// multicast objects with multimem instructions.
//   all_gather      each rank copies its block into its buffer; barrier; each
//                   rank loads every rank's block into recv; barrier. Where the
//                   switch channel has a multicast address: barrier; rank r
//                   multicast-stores its block into slot r of every buffer;
//                   barrier; each rank copies every slot of its own buffer
//                   into recv (one store crosses each rank's link instead of
//                   P-1 loads; the first barrier keeps the rule below).
//   broadcast       the root copies its data into its buffer; barrier; every
//                   other rank loads it into recv; barrier. Where the switch
//                   channel has a multicast address: barrier; the root
//                   multicast-stores its data into every buffer; barrier;
//                   each rank copies its own buffer into recv (the root's
//                   link carries the data once instead of P-1 times).
//   all_to_all      each rank copies its P send blocks into its buffer;
//                   barrier; rank r loads block r of every buffer into recv;
//                   barrier.
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
// Single copy (host): from prims.single_copy_min_bytes() up, where every rank
// may read every peer's user buffers (thread ranks: loads; process ranks:
// cross-memory attach), the schedules skip the registered buffers and read
// peers' send/recv buffers in place — the multicast load-reduce with user
// buffers registered. Each datum is then copied once instead of twice:
//
//   all_reduce      publish; rank r reduces slice r of every rank's send (its
//                   own first, then r+1, r+2, … mod P; peers' chunks read into
//                   its scratch) into its recv; barrier; it reads every other
//                   slice from its owner's recv; barrier (two-shot). Where the
//                   transport sets a one-shot size (GPU windows) and no rank
//                   is in place, up to that size: rank r reduces the whole of
//                   every rank's send, ranks 0, 1, … in order, into its recv;
//                   barrier (one-shot: one barrier fewer, P-1 peer reads of
//                   the whole instead of 2(P-1)/P).
//   reduce_scatter  publish; rank r reduces block r of every rank's send into
//                   recv (same order); barrier.
//   all_gather      publish; rank r reads every block from its owner's send;
//                   barrier.
//   broadcast       publish; every rank but the root reads the root's send;
//                   barrier. In place the root has nothing of its own to
//                   copy, so where ranks may write into peers' buffers it
//                   takes a share: it writes the first c/P elements of every
//                   other rank's recv while they read the rest (each side
//                   then copies (P-1)c/P; on 2 process ranks 1.4-3.5x less
//                   time than the receiver reading everything at 256 KiB-64
//                   MiB, bench/results/broadcast_split_copy_2026-12-05.md).
//   all_to_all      publish; rank r reads block r of every rank's send; barrier.
//
// Where the registered buffers are bound to a multicast address and every
// rank's call sits at the same offset in them (prims::user_multicast), the
// switch channel runs over the user buffers themselves (through_switch):
// publish; all_reduce: rank r load-reduces slice r of every send and stores
// it into every recv; reduce_scatter: it load-reduces block r; all_gather:
// it stores its block into slot r of every recv; broadcast: the root stores
// into every recv; barrier. No copy is staged, and each rank touches only
// its own slice, block or slot of the others' buffers, so in place is safe.
//
// The final barrier keeps a rank's buffers valid while peers still read them.
// Chunks of single_copy_chunk bytes keep a partial result in cache between
// the read and the reduction.
//
// Device: the same code runs in a kernel; on the shm layout the switch
// channel is plain loads/stores through peer pointers of the mapped segment.
//
// Stripes (collx/stripes.hpp): every collective splits. Stripe s of every
// rank runs the schedule above on slice s of each block, with its own share
// of the registered buffers, its own barrier lines and its own published
// user buffers (prims), so the stripes of a call never wait for each other:
// a GPU call runs on all of its blocks. Decisions that must be the same for
// every stripe (single copy or staged, one-shot or two-shot) are taken on
// the whole call's size (schedule_args::block(): a slice keeps the call's
// per-rank count as its stride).
//
// Determinism: each element is reduced once, by the rank owning its slice, in
// an order fixed by (rank, P) (the owner's copy first, then rank+1, rank+2, …
// mod P); everyone else copies the result. One-shot: every rank reduces every
// element in the same order (rank 0 first). all_reduce results are bitwise
// identical on every rank and across calls of the same size.
#pragma once

#include <collx/algo/cost.hpp>
#include <collx/algo/ids.hpp>
#include <collx/coll.hpp>
#include <collx/config.hpp>
#include <collx/error.hpp>
#include <collx/prims.hpp>

#include <cstddef>
#include <cstdint>

namespace collx::algo {

struct nvls {
  static constexpr algo_id id = algo_id::nvls;
  static constexpr const char* name = collx::name(id);
  static constexpr bool deterministic = true;
  /// Moves data by loads and stores of peers' registered buffers, not through
  /// connections: composes only with a transport that offers
  /// peer_buffer_access (collx/composition.hpp), and the tuner prices it by
  /// barriers and peer bandwidth instead of protocol steps.
  static constexpr bool needs_peer_memory = true;
  /// all_reduce and reduce_scatter are written against a switch channel
  /// (multicast load-reduce and store: prims::mc_load_reduce / mc_store).
  static constexpr bool needs_multicast = true;

  COLLX_HOST_DEVICE static constexpr bool implements(coll c) {
    return c == coll::all_reduce || c == coll::reduce_scatter || c == coll::all_gather ||
           c == coll::broadcast || c == coll::all_to_all;
  }
  /// Every collective splits into stripes (see the header comment).
  COLLX_HOST_DEVICE static constexpr bool stripe_split(coll c) { return implements(c); }

  /// Terms for `bytes` on P ranks (algo/cost.hpp); no connection steps or
  /// sent bytes. barriers: staged, two per segment of the registered buffer
  /// (x.peer_buffer_bytes; all_gather's segments hold one rank's block, the
  /// others' the whole call: P blocks of buffer / P); with single copy
  /// (x.single_copy), the one that publishes the user buffers, the final one,
  /// and for all_reduce the one between its reduce and its gather. peer_bytes: loads from and stores to
  /// peers' buffers (the switch channel's P-1 copies). staged_bytes: copies
  /// into and out of the own registered buffer, none with single copy, which
  /// reads peers' user buffers in place. bytes_reduced: bytes combined.
  /// A single-copy all_reduce out of place up to x.one_shot_bytes is
  /// one-shot (one_shot below): two barriers, (P-1)·B read and reduced.
  /// local_bytes: copies from the own send to the own recv. With a multicast
  /// address (x.multicast): the switch channel's operations are switch_bytes
  /// instead of peer_bytes and bytes_reduced, and all_gather and broadcast
  /// store through it (multicast_cost); with single copy too, the
  /// registered buffers are bound to it (through_switch).
  COLLX_HOST_DEVICE static constexpr cost_terms cost(coll c, int P, double bytes,
                                                     const cost_context& x = {}) {
    if (P <= 1 || !implements(c)) return {};
    if (x.multicast && c != coll::all_to_all) return multicast_cost(c, P, bytes, x);
    const double f = double(P - 1) / P;
    cost_terms t{};
    if (c == coll::all_reduce && x.single_copy && !x.in_place && bytes <= x.one_shot_bytes) {
      // One-shot: the whole of every peer's send read and reduced; publish, end.
      t.barriers = 2, t.peer_bytes = (P - 1) * bytes, t.bytes_reduced = (P - 1) * bytes;
      return t;
    }
    const double per_segment = c == coll::all_gather ? bytes / P : bytes;
    const double segments = x.peer_buffer_bytes > 0 ? ceil_nonneg(per_segment / x.peer_buffer_bytes) : 1;
    t.barriers = x.single_copy ? (c == coll::all_reduce ? 3 : 2) : 2 * (segments > 1 ? segments : 1);
    double staged = 0;
    switch (c) {
      case coll::all_reduce:  // all in, all out of the own buffer
        t.peer_bytes = 2 * f * bytes, t.bytes_reduced = f * bytes, staged = 2 * bytes;
        break;
      case coll::reduce_scatter:  // P blocks in
        t.peer_bytes = f * bytes, t.bytes_reduced = f * bytes, staged = bytes;
        break;
      case coll::broadcast:  // the root's copy in; the others load it (in place with
                             // single copy, the root writes 1/P into each of them)
        t.peer_bytes = x.single_copy && x.in_place ? f * bytes : bytes, staged = bytes;
        break;
      case coll::all_gather:  // the own block in and out
        t.peer_bytes = f * bytes, staged = 2 * bytes / P;
        break;
      default:  // all_to_all: P blocks in, the own one out
        t.peer_bytes = f * bytes, staged = bytes + bytes / P;
        break;
    }
    t.staged_bytes = x.single_copy ? 0 : staged;
    // Copies between the own user buffers: the broadcast root's send into its
    // recv (none in place); with single copy, the own block of an all_gather
    // (none in place) or all_to_all.
    if (c == coll::broadcast) t.local_bytes = x.in_place ? 0 : bytes;
    else if (x.single_copy && ((c == coll::all_gather && !x.in_place) || c == coll::all_to_all))
      t.local_bytes = bytes / P;
    return t;
  }

  /// Staged through a multicast address, per rank and link direction:
  ///   all_reduce      load-reduce of its slice (B/P back; its copy of every
  ///                   slice, B, out) and store of it (B/P out; every slice,
  ///                   B, in): (1 + 1/P)·B; copies in and out: 2B.
  ///   reduce_scatter  load-reduce of its block: its copy of every block, B,
  ///                   out; the P blocks copied in: B.
  ///   all_gather      store of its block (B/P out), every block in: B; the
  ///                   P blocks copied out: B. A segment holds a P-th of the
  ///                   buffer per block, so B / buffer segments.
  ///   broadcast       the root's store out, every rank's copy in: B; copied
  ///                   out: B (the root copies its send into its recv).
  /// With single copy (registered buffers bound to the multicast address:
  /// through_switch) the same switch bytes, no copy, and two barriers.
  COLLX_HOST_DEVICE static constexpr cost_terms multicast_cost(coll c, int P, double bytes,
                                                               const cost_context& x) {
    cost_terms t{};
    t.switch_bytes = c == coll::all_reduce ? (1 + 1.0 / P) * bytes : bytes;
    if (x.single_copy) {
      t.barriers = 2;
      return t;
    }
    const double segments = x.peer_buffer_bytes > 0 ? ceil_nonneg(bytes / x.peer_buffer_bytes) : 1;
    t.barriers = 2 * (segments > 1 ? segments : 1);
    t.staged_bytes = c == coll::all_reduce ? 2 * bytes : bytes;
    if (c == coll::broadcast) t.local_bytes = x.in_place ? 0 : bytes;
    return t;
  }

  /// The sides of a call's registered buffers its switch path
  /// (through_switch) goes through: load-reduces from every send, stores
  /// into every recv. It runs where each of them is one multicast range
  /// (on_switch); the automatic choice prices it where their windows are
  /// bound (tune/mesh_problem.hpp). None: the collective has no such path.
  struct switch_sides {
    bool send = false, recv = false;
  };
  COLLX_HOST_DEVICE static constexpr switch_sides sides_on_switch(coll c) {
    switch (c) {
      case coll::all_reduce: return {true, true};
      case coll::reduce_scatter: return {true, false};
      case coll::all_gather:
      case coll::broadcast: return {false, true};
      default: return {};
    }
  }

  /// Elements of each receiver's recv an in-place single-copy broadcast root
  /// writes: c/P, so that it copies (P-1)c/P, as every receiver does.
  COLLX_HOST_DEVICE static constexpr std::size_t broadcast_share(std::size_t c, int P) {
    return c / static_cast<std::size_t>(P);
  }

  /// Bytes a single-copy schedule reduces per step (the partial result stays in L2).
  static constexpr std::size_t single_copy_chunk = 256 * 1024;

  template <coll C, class Prims, class T>
  COLLX_HOST_DEVICE static status run(Prims& p, const schedule_args<T>& a) {
    static_assert(implements(C), "algo::nvls does not implement this collective (see C above)");
    // Primitives without the single-copy calls (a transport without user-buffer
    // access, an instrumented test harness) always stage.
    if constexpr (requires { p.single_copy_min_bytes(); }) {
      const bool whole = C == coll::all_reduce || C == coll::broadcast;
      const std::uint64_t total = std::uint64_t(a.block()) * sizeof(T) * (whole ? 1 : a.nranks);
      if (a.nranks > 1 && total >= p.single_copy_min_bytes()) return single_copy<C>(p, a);
    }
    if constexpr (C == coll::all_reduce) return all_reduce(p, a);
    else if constexpr (C == coll::reduce_scatter) return reduce_scatter(p, a);
    else if constexpr (C == coll::all_gather) return all_gather(p, a);
    else if constexpr (C == coll::broadcast) return broadcast(p, a);
    else if constexpr (C == coll::all_to_all) return all_to_all(p, a);
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
      // The switch channel's two operations: load-reduce slice r over every
      // buffer (into this rank's own copy), then store it into every buffer.
      COLLX_TRY(p.mc_load_reduce(lo, mine + lo, hi - lo, true));
      COLLX_TRY(p.mc_store(lo, mine + lo, hi - lo));
      COLLX_TRY(p.barrier());
      COLLX_TRY(p.local_copy(mine, a.recv + so, m, false));
    }
    return status::ok;
  }

  /// Rank q's send (or recv) elements [off, off + n): in place when loadable,
  /// else read into `scratch`.
  template <class Prims, class T>
  COLLX_HOST_DEVICE static status peer_span(Prims& p, int q, bool recv_side, std::size_t off, std::size_t n,
                                            T* scratch, const T*& out) {
    if (const T* d = p.user_buffer(q, recv_side)) {
      out = d + off;
      return status::ok;
    }
    out = scratch;
    return p.read_user(q, recv_side, off, scratch, n);
  }

  /// dst[0, n) ← rank q's send [off, off + n), one copy.
  template <class Prims, class T>
  COLLX_HOST_DEVICE static status read_whole(Prims& p, int q, std::size_t off, T* dst, std::size_t n) {
    if (const T* d = p.user_buffer(q, false)) return p.local_copy(d + off, dst, n, false);
    return p.read_user(q, false, off, dst, n);
  }

  /// dst[0, n) ← ⊕ over ranks q of q's send [off, off + n), starting with
  /// rank `first`'s, then first+1, first+2, … mod P. post() on the last step.
  template <class Prims, class T>
  COLLX_HOST_DEVICE static status reduce_from_peers(Prims& p, const schedule_args<T>& a, int first,
                                                    std::size_t off, T* dst, std::size_t n) {
    const int P = a.nranks, r = a.rank;
    if constexpr (requires { Prims::reduce_many_max; })
      if (loads_every_peer(p, a)) return reduce_loaded(p, a, first, off, dst, n);
    // Scratch: [0, chunk) the partial result, [chunk, 2 chunk) a peer's chunk;
    // a stripe's share of the buffer may hold less than two default chunks.
    const std::size_t most = p.buffer_elems() / 2, want = single_copy_chunk / sizeof(T);
    const std::size_t chunk = want < most ? want : most;
    T* acc = p.buffer(r);
    T* in = acc + chunk;
    for (std::size_t o = 0; o < n; o += chunk) {
      const std::size_t m = n - o < chunk ? n - o : chunk;
      const T* x = a.send + off + o;
      if (first != r) COLLX_TRY(peer_span(p, first, false, off + o, m, acc, x));
      for (int k = 1; k < P; ++k) {
        const int q = (first + k) % P;
        const T* y = a.send + off + o;
        if (q != r) COLLX_TRY(peer_span(p, q, false, off + o, m, in, y));
        T* d = k == P - 1 ? dst + o : acc;
        COLLX_TRY(p.local_reduce(x, y, d, m, k == P - 1));
        x = d;
      }
    }
    return status::ok;
  }

  /// Whether every peer's send buffer can be loaded here (thread ranks,
  /// symmetric memory, GPU windows), rather than read by the transport.
  template <class Prims, class T>
  COLLX_HOST_DEVICE static bool loads_every_peer(Prims& p, const schedule_args<T>& a) {
    for (int q = 0; q < a.nranks; ++q)
      if (q != a.rank && p.user_buffer(q, false) == nullptr) return false;
    return true;
  }

  /// reduce_from_peers where every peer's send is loadable: each chunk is
  /// reduced from the P sends in one pass (all of an element's loads in
  /// flight together: one round trip to the peers per element on a GPU,
  /// instead of one per peer), at most Prims::reduce_many_max sources per
  /// pass, later passes starting from dst's partial result; no scratch. The
  /// same order, so the same bits, as the pairwise chain.
  template <class Prims, class T>
  COLLX_HOST_DEVICE static status reduce_loaded(Prims& p, const schedule_args<T>& a, int first,
                                                std::size_t off, T* dst, std::size_t n) {
    const int P = a.nranks, r = a.rank;
    const std::size_t chunk = single_copy_chunk / sizeof(T);
    for (std::size_t o = 0; o < n; o += chunk) {
      const std::size_t m = n - o < chunk ? n - o : chunk;
      int k = 0;
      while (k < P) {
        const T* src[Prims::reduce_many_max];
        int s = 0;
        if (k > 0) src[s++] = dst + o;
        for (; s < Prims::reduce_many_max && k < P; ++s, ++k) {
          const int q = (first + k) % P;
          src[s] = (q == r ? a.send : p.user_buffer(q, false)) + off + o;
        }
        COLLX_TRY(p.local_reduce_many(src, s, dst + o, m, k == P));
      }
    }
    return status::ok;
  }

  /// Whether a single-copy all_reduce is one-shot: every rank reduces the
  /// whole input from every rank's send (2 barriers) instead of its slice,
  /// then gathering the others' slices (3 barriers). Only where the
  /// transport sets a size for it (prims::single_copy_one_shot_bytes), up to
  /// that size, and only when no rank is in place (its result would
  /// overwrite an input peers are still reading). The same on every rank:
  /// count is, and the in-place flags are what every rank published.
  template <class Prims, class T>
  COLLX_HOST_DEVICE static bool one_shot(Prims& p, const schedule_args<T>& a) {
    if constexpr (requires { p.single_copy_one_shot_bytes(); }) {
      if (std::uint64_t(a.block()) * sizeof(T) > p.single_copy_one_shot_bytes()) return false;
      for (int q = 0; q < a.nranks; ++q)
        if (p.user_in_place(q)) return false;
      return true;
    } else {
      return (void)p, (void)a, false;
    }
  }

  /// Whether a single-copy call runs through the multicast address of its
  /// registered buffers: every side it reduces from or stores into is one
  /// multicast range on every rank (prims::user_multicast; the same answer
  /// on every rank).
  template <coll C, class Prims>
  COLLX_HOST_DEVICE static bool on_switch(Prims& p) {
    constexpr switch_sides s = sides_on_switch(C);
    if constexpr (!s.send && !s.recv) return (void)p, false;
    else return (!s.send || p.user_multicast(false)) && (!s.recv || p.user_multicast(true));
  }

  /// The switch channel over the registered buffers themselves (after the
  /// barrier that published them; one more ends the call): each rank
  /// load-reduces its slice of every rank's send and stores it into every
  /// rank's recv (all_reduce), load-reduces its block (reduce_scatter),
  /// stores its block into its slot of every recv (all_gather), or the root
  /// stores its data into every recv (broadcast). Each rank reads and writes
  /// only its own slice, block or slot of the others' buffers, so in place
  /// is safe.
  template <coll C, class Prims, class T>
  COLLX_HOST_DEVICE static status through_switch(Prims& p, const schedule_args<T>& a) {
    const std::size_t c = a.count, b = a.block(), Pz = static_cast<std::size_t>(a.nranks),
                      rz = static_cast<std::size_t>(a.rank);
    if constexpr (C == coll::all_reduce) {
      const std::size_t lo = c * rz / Pz, hi = c * (rz + 1) / Pz;
      COLLX_TRY(p.mc_user_load_reduce(lo, a.recv + lo, hi - lo, true));
      COLLX_TRY(p.mc_user_store(lo, a.recv + lo, hi - lo));
    } else if constexpr (C == coll::reduce_scatter) {
      COLLX_TRY(p.mc_user_load_reduce(rz * b, a.recv, c, true));
    } else if constexpr (C == coll::all_gather) {
      COLLX_TRY(p.mc_user_store(rz * b, a.send, c));
    } else if constexpr (C == coll::broadcast) {
      if (a.rank == a.root) COLLX_TRY(p.mc_user_store(0, a.send, c));
    }
    return p.barrier();
  }

  template <coll C, class Prims, class T>
  COLLX_HOST_DEVICE static status single_copy(Prims& p, const schedule_args<T>& a) {
    const int P = a.nranks, r = a.rank;
    // c: this stripe's elements per block; b: elements between blocks.
    const std::size_t c = a.count, b = a.block(), Pz = static_cast<std::size_t>(P),
                      rz = static_cast<std::size_t>(r);
    COLLX_TRY(p.publish_user_buffers(a.send, a.recv, a.count));
    if constexpr (requires { p.user_multicast(false); })
      if (on_switch<C>(p)) return through_switch<C>(p, a);
    if constexpr (C == coll::all_reduce) {
      if (one_shot(p, a)) {
        COLLX_TRY(reduce_from_peers(p, a, 0, 0, a.recv, c));  // every rank in the order 0, 1, …
        return p.barrier();
      }
      const std::size_t lo = c * rz / Pz, hi = c * (rz + 1) / Pz;
      COLLX_TRY(reduce_from_peers(p, a, r, lo, a.recv + lo, hi - lo));
      COLLX_TRY(p.barrier());
      for (int k = 1; k < P; ++k) {
        const int q = (r + k) % P;
        const std::size_t qlo = c * static_cast<std::size_t>(q) / Pz,
                          qhi = c * static_cast<std::size_t>(q + 1) / Pz;
        if (const T* d = p.user_buffer(q, true))
          COLLX_TRY(p.local_copy(d + qlo, a.recv + qlo, qhi - qlo, false));
        else COLLX_TRY(p.read_user(q, true, qlo, a.recv + qlo, qhi - qlo));
      }
    } else if constexpr (C == coll::reduce_scatter) {
      COLLX_TRY(reduce_from_peers(p, a, r, rz * b, a.recv, c));
    } else if constexpr (C == coll::broadcast) {
      // The root's share when it is in place (see above); the same on every
      // rank: the root's published buffers say whether it is.
      const std::size_t pushed = p.can_write_user() && p.user_in_place(a.root) ? broadcast_share(c, P) : 0;
      if (r == a.root) {
        COLLX_TRY(p.local_copy(a.send, a.recv, c, false));
        for (int k = 1; k < P && pushed > 0; ++k) COLLX_TRY(p.write_user((r + k) % P, 0, a.send, pushed));
      } else {
        COLLX_TRY(read_whole(p, a.root, pushed, a.recv + pushed, c - pushed));
      }
    } else if constexpr (C == coll::all_to_all) {
      COLLX_TRY(p.local_copy(a.send + rz * b, a.recv + rz * b, c, false));
      for (int k = 1; k < P; ++k) {
        const int q = (r + k) % P;
        COLLX_TRY(read_whole(p, q, rz * b, a.recv + static_cast<std::size_t>(q) * b, c));
      }
    } else {
      COLLX_TRY(p.local_copy(a.send, a.recv + rz * b, c, false));
      for (int k = 1; k < P; ++k) {
        const int q = (r + k) % P;
        T* dst = a.recv + static_cast<std::size_t>(q) * b;
        if (const T* d = p.user_buffer(q, false)) COLLX_TRY(p.local_copy(d, dst, c, false));
        else COLLX_TRY(p.read_user(q, false, 0, dst, c));
      }
    }
    return p.barrier();
  }

  template <class Prims, class T>
  COLLX_HOST_DEVICE static status broadcast(Prims& p, const schedule_args<T>& a) {
    const int P = a.nranks, r = a.rank;
    const std::size_t c = a.count;
    if (P == 1) return p.local_copy(a.send, a.recv, c, false);
    const std::size_t seg = p.buffer_elems();
    if constexpr (requires {
                    requires Prims::multicast;
                    p.mc_store_fans_out();
                  }) {
      // Through a multicast address the root stores each segment once and the
      // switch writes it into every buffer, where the P-1 receivers would each
      // load it across the root's link. As in all_gather, the barrier comes
      // first (peers may still be copying out of their buffers).
      if (p.mc_store_fans_out()) {
        for (std::size_t so = 0; so < c; so += seg) {
          const std::size_t m = c - so < seg ? c - so : seg;
          COLLX_TRY(p.barrier());
          if (r == a.root) COLLX_TRY(p.mc_store(0, a.send + so, m));
          COLLX_TRY(p.barrier());
          if (r != a.root) COLLX_TRY(p.local_copy(p.buffer(r), a.recv + so, m, false));
          else COLLX_TRY(p.local_copy(a.send + so, a.recv + so, m, false));
        }
        return status::ok;
      }
    }
    for (std::size_t so = 0; so < c; so += seg) {
      const std::size_t m = c - so < seg ? c - so : seg;
      if (r == a.root) COLLX_TRY(p.local_copy(a.send + so, p.buffer(r), m, false));
      COLLX_TRY(p.barrier());
      if (r != a.root) COLLX_TRY(p.local_copy(p.buffer(a.root), a.recv + so, m, false));
      else COLLX_TRY(p.local_copy(a.send + so, a.recv + so, m, false));
      COLLX_TRY(p.barrier());
    }
    return status::ok;
  }

  template <class Prims, class T>
  COLLX_HOST_DEVICE static status all_to_all(Prims& p, const schedule_args<T>& a) {
    return staged_blocks<false>(p, a);
  }

  template <class Prims, class T>
  COLLX_HOST_DEVICE static status reduce_scatter(Prims& p, const schedule_args<T>& a) {
    return staged_blocks<true>(p, a);
  }

  /// Staged all_to_all (Reduce = false) and reduce_scatter: per segment, each
  /// rank stages its P blocks in its buffer (block q at q·m), then, after a
  /// barrier, takes block r of every rank's buffer: copied to recv block q,
  /// or reduced over q into recv.
  template <bool Reduce, class Prims, class T>
  COLLX_HOST_DEVICE static status staged_blocks(Prims& p, const schedule_args<T>& a) {
    const int P = a.nranks, r = a.rank;
    const std::size_t c = a.count, b = a.block(), Pz = static_cast<std::size_t>(P),
                      rz = static_cast<std::size_t>(r);
    if (P == 1) return p.local_copy(a.send, a.recv, c, Reduce);
    T* mine = p.buffer(r);
    const std::size_t seg = p.buffer_elems() / Pz;  // ≥ 1: buffers hold ≥ 1 MiB, P ≤ 4096
    for (std::size_t so = 0; so < c; so += seg) {
      const std::size_t m = c - so < seg ? c - so : seg;
      for (std::size_t q = 0; q < Pz; ++q)
        COLLX_TRY(p.local_copy(a.send + q * b + so, mine + q * m, m, false));
      COLLX_TRY(p.barrier());
      if constexpr (Reduce) {
        COLLX_TRY(p.mc_load_reduce(rz * m, a.recv + so, m, true));  // block r over every buffer
      } else {
        for (std::size_t q = 0; q < Pz; ++q)
          COLLX_TRY(p.local_copy(p.buffer(static_cast<int>(q)) + rz * m, a.recv + q * b + so, m, false));
      }
      COLLX_TRY(p.barrier());
    }
    return status::ok;
  }

  template <class Prims, class T>
  COLLX_HOST_DEVICE static status all_gather(Prims& p, const schedule_args<T>& a) {
    const int P = a.nranks, r = a.rank;
    const std::size_t c = a.count;
    if (P == 1) return p.local_copy(a.send, a.recv, c, false);
    if constexpr (requires {
                    requires Prims::multicast;
                    p.mc_store_fans_out();
                  }) {
      // Through a multicast address each rank stores its block once and the
      // switch writes it into every buffer: a segment holds P blocks, each
      // rank copies them all out of its own buffer. The barrier comes first
      // (peers may still be copying out of their buffers), so every store
      // into a peer's buffer still falls between two barriers.
      const std::size_t seg = p.buffer_elems() / static_cast<std::size_t>(P);
      if (p.mc_store_fans_out() && seg > 0) {
        for (std::size_t so = 0; so < c; so += seg) {
          const std::size_t m = c - so < seg ? c - so : seg;
          COLLX_TRY(p.barrier());
          COLLX_TRY(p.mc_store(static_cast<std::size_t>(r) * m, a.send + so, m));
          COLLX_TRY(p.barrier());
          for (int q = 0; q < P; ++q)
            COLLX_TRY(p.local_copy(p.buffer(r) + static_cast<std::size_t>(q) * m,
                                   a.recv + static_cast<std::size_t>(q) * a.block() + so, m, false));
        }
        return status::ok;
      }
    }
    const std::size_t seg = p.buffer_elems();
    for (std::size_t so = 0; so < c; so += seg) {
      const std::size_t m = c - so < seg ? c - so : seg;
      COLLX_TRY(p.local_copy(a.send + so, p.buffer(r), m, false));
      COLLX_TRY(p.barrier());
      for (int q = 0; q < P; ++q)
        COLLX_TRY(p.local_copy(p.buffer(q), a.recv + static_cast<std::size_t>(q) * a.block() + so, m, false));
      COLLX_TRY(p.barrier());
    }
    return status::ok;
  }
};

}  // namespace collx::algo
