// collx/algo/ring.hpp — the ring algorithm.
//
// all_reduce is a reduce-scatter followed by an all-gather around the ring
// (2(P-1) steps per chunk); all_gather and reduce_scatter are one half each;
// broadcast and reduce are a pipelined chain that starts (broadcast) or ends
// (reduce) at the root. Data is cut into chunks of at most prims.max_chunk()
// elements so the FIFOs pipeline and the ring cannot deadlock. Written only
// against the primitives; runs on host threads and in CUDA blocks.
//
// Determinism: every all_reduce element is reduced along the ring once, ending
// at one rank, in an order fixed by P and the chunking, then copied around;
// results are bitwise identical on every rank and across calls.
#pragma once

#include <collx/algo/cost.hpp>
#include <collx/algo/ids.hpp>
#include <collx/coll.hpp>
#include <collx/config.hpp>
#include <collx/error.hpp>
#include <collx/prims.hpp>

#include <cstddef>

namespace collx::algo {

struct ring {
  static constexpr algo_id id = algo_id::ring;
  static constexpr const char* name = collx::name(id);
  static constexpr bool deterministic = true;
  /// A rank receives from its predecessor and sends to its successor only:
  /// one connection each way (stripes.hpp: connections_of).
  static constexpr std::size_t connections = 1;

  COLLX_HOST_DEVICE static constexpr bool implements(coll c) {
    return c == coll::all_reduce || c == coll::all_gather || c == coll::reduce_scatter ||
           c == coll::broadcast || c == coll::reduce;
  }

  /// α-β-γ terms on the critical path for `bytes` (the collective's size as
  /// nccl-tests counts it) on P ranks: steps, bytes sent per rank, bytes reduced
  /// (exact definitions in algo/cost.hpp).
  /// Across nodes one link leaves each node (rank order is node order), and
  /// it carries what its sender sends: node_bytes = bytes_sent. Each step
  /// waits for the previous step of the rank before it, so a causal chain is
  /// a run of consecutive ranks as long as the steps, and one in L of its
  /// links crosses nodes: node_steps = ⌈steps / L⌉ (the chain that starts at
  /// a node's first rank). Broadcast and reduce chains start at the root,
  /// which cost() does not know: not stated.
  COLLX_HOST_DEVICE static constexpr cost_terms cost(coll c, int P, double bytes,
                                                     const cost_context& x = {}) {
    if (P <= 1) return {0, 0, 0};  // a local copy
    const double p = P, f = (p - 1) / p;
    cost_terms t{};
    switch (c) {
      case coll::all_reduce: t = {2 * (p - 1), 2 * f * bytes, f * bytes}; break;
      case coll::all_gather: t = {p - 1, f * bytes, 0}; break;
      case coll::reduce_scatter: t = {p - 1, f * bytes, f * bytes}; break;
      case coll::broadcast: t = {p - 1, bytes, 0}; break;  // pipelined chain: latency grows with P
      case coll::reduce: t = {p - 1, bytes, bytes}; break;
      case coll::all_to_all:  // not implemented by ring
      case coll::all_to_allv:
      case coll::send_recv:
      case coll::barrier: return {0, 0, 0};
    }
    if (placed_in_nodes(P, x)) {
      t.node_bytes = t.bytes_sent;
      if (c == coll::all_reduce || c == coll::all_gather || c == coll::reduce_scatter)
        t.node_steps = ceil_nonneg(t.steps / x.node_ranks);
    }
    return t;
  }

  /// Every collective may be split into stripes (blocks addressed by a.block()).
  COLLX_HOST_DEVICE static constexpr bool stripe_split(coll c) { return implements(c); }

  template <coll C, class Prims, class T>
  COLLX_HOST_DEVICE static status run(Prims& p, const schedule_args<T>& a) {
    static_assert(implements(C), "algo::ring does not implement this collective (see C above)");
    if constexpr (C == coll::all_reduce) return all_reduce(p, a);
    else if constexpr (C == coll::all_gather) return all_gather(p, a);
    else if constexpr (C == coll::reduce_scatter) return reduce_scatter(p, a);
    else if constexpr (C == coll::broadcast) return broadcast(p, a);
    else if constexpr (C == coll::reduce) return reduce(p, a);
  }

 private:
  COLLX_HOST_DEVICE static constexpr int mod(int x, int P) { return ((x % P) + P) % P; }

  template <class Prims, class T>
  COLLX_HOST_DEVICE static status all_reduce(Prims& p, const schedule_args<T>& a) {
    const int P = a.nranks, r = a.rank;
    if (P == 1) return p.local_copy(a.send, a.recv, a.count, true);
    const int next = mod(r + 1, P), prev = mod(r - 1, P);
    const std::size_t chunk = p.max_chunk(), loop = chunk * static_cast<std::size_t>(P);
    for (std::size_t off = 0; off < a.count; off += loop) {
      const std::size_t n = a.count - off < loop ? a.count - off : loop;
      const std::size_t per = (n + P - 1) / P;
      // Chunk j of this loop: [off + j*per, off + j*per + len(j)), possibly empty at the end.
      auto begin = [&](int j) { return off + static_cast<std::size_t>(j) * per; };
      auto len = [&](int j) {
        const std::size_t b = static_cast<std::size_t>(j) * per;
        return b >= n ? std::size_t(0) : (n - b < per ? n - b : per);
      };
      int j = mod(r - 1, P);
      COLLX_TRY(p.send(next, a.send + begin(j), len(j)));
      for (int k = 2; k < P; ++k) {
        j = mod(r - k, P);
        COLLX_TRY(p.recv_reduce_send(prev, next, a.send + begin(j), len(j)));
      }
      j = r;
      COLLX_TRY(p.recv_reduce_copy_send(prev, next, a.send + begin(j), a.recv + begin(j), len(j)));
      for (int k = 1; k < P - 1; ++k) {
        j = mod(r - k, P);
        COLLX_TRY(p.recv_copy_send(prev, next, a.recv + begin(j), len(j)));
      }
      j = mod(r + 1, P);
      COLLX_TRY(p.recv(prev, a.recv + begin(j), len(j)));
    }
    return status::ok;
  }

  template <class Prims, class T>
  COLLX_HOST_DEVICE static status all_gather(Prims& p, const schedule_args<T>& a) {
    const int P = a.nranks, r = a.rank;
    const std::size_t c = a.count, b = a.block();
    if (P == 1) return p.local_copy(a.send, a.recv, c, false);
    const int next = mod(r + 1, P), prev = mod(r - 1, P);
    const std::size_t chunk = p.max_chunk();
    for (std::size_t off = 0; off < c; off += chunk) {
      const std::size_t n = c - off < chunk ? c - off : chunk;
      COLLX_TRY(p.copy_send(next, a.send + off, a.recv + static_cast<std::size_t>(r) * b + off, n));
      for (int k = 1; k < P - 1; ++k) {
        const int j = mod(r - k, P);
        COLLX_TRY(p.recv_copy_send(prev, next, a.recv + static_cast<std::size_t>(j) * b + off, n));
      }
      COLLX_TRY(p.recv(prev, a.recv + static_cast<std::size_t>(mod(r + 1, P)) * b + off, n));
    }
    return status::ok;
  }

  template <class Prims, class T>
  COLLX_HOST_DEVICE static status reduce_scatter(Prims& p, const schedule_args<T>& a) {
    const int P = a.nranks, r = a.rank;
    const std::size_t c = a.count, b = a.block();
    if (P == 1) return p.local_copy(a.send, a.recv, c, true);
    const int next = mod(r + 1, P), prev = mod(r - 1, P);
    const std::size_t chunk = p.max_chunk();
    for (std::size_t off = 0; off < c; off += chunk) {
      const std::size_t n = c - off < chunk ? c - off : chunk;
      COLLX_TRY(p.send(next, a.send + static_cast<std::size_t>(mod(r - 1, P)) * b + off, n));
      for (int k = 2; k < P; ++k) {
        const int j = mod(r - k, P);
        COLLX_TRY(p.recv_reduce_send(prev, next, a.send + static_cast<std::size_t>(j) * b + off, n));
      }
      COLLX_TRY(p.recv_reduce_copy(prev, a.send + static_cast<std::size_t>(r) * b + off, a.recv + off, n));
    }
    return status::ok;
  }

  template <class Prims, class T>
  COLLX_HOST_DEVICE static status broadcast(Prims& p, const schedule_args<T>& a) {
    const int P = a.nranks, r = a.rank;
    if (P == 1) return p.local_copy(a.send, a.recv, a.count, false);
    const int next = mod(r + 1, P), prev = mod(r - 1, P), pos = mod(r - a.root, P);
    const std::size_t chunk = p.max_chunk();
    for (std::size_t off = 0; off < a.count; off += chunk) {
      const std::size_t n = a.count - off < chunk ? a.count - off : chunk;
      if (pos == 0) COLLX_TRY(p.copy_send(next, a.send + off, a.recv + off, n));
      else if (pos == P - 1) COLLX_TRY(p.recv(prev, a.recv + off, n));
      else COLLX_TRY(p.recv_copy_send(prev, next, a.recv + off, n));
    }
    return status::ok;
  }

  template <class Prims, class T>
  COLLX_HOST_DEVICE static status reduce(Prims& p, const schedule_args<T>& a) {
    const int P = a.nranks, r = a.rank;
    if (P == 1) return p.local_copy(a.send, a.recv, a.count, true);
    // The chain runs root+1 → root+2 → … → root.
    const int next = mod(r + 1, P), prev = mod(r - 1, P), pos = mod(r - a.root - 1, P);
    const std::size_t chunk = p.max_chunk();
    for (std::size_t off = 0; off < a.count; off += chunk) {
      const std::size_t n = a.count - off < chunk ? a.count - off : chunk;
      if (pos == 0) COLLX_TRY(p.send(next, a.send + off, n));
      else if (pos == P - 1) COLLX_TRY(p.recv_reduce_copy(prev, a.send + off, a.recv + off, n));
      else COLLX_TRY(p.recv_reduce_send(prev, next, a.send + off, n));
    }
    return status::ok;
  }
};

}  // namespace collx::algo
