// collx/algo/rhd.hpp — recursive halving-doubling.
//
// reduce_scatter is recursive halving: in L = log2 P' steps each rank sends the
// half of its current range it gives away to its partner v ^ mask and reduces
// the half it keeps. all_gather is recursive doubling (the same steps
// reversed, copying instead of reducing), all_reduce is one then the other.
// For P that is not a power of two the first 2·(P - P') ranks pair up (see
// detail/hypercube.hpp): the even rank of a pair folds its whole input into
// the odd one before the hypercube steps and gets the whole result back after.
//
// Partners both send then receive, so every exchange is paced piece by piece
// (detail::paced): a sliding window lets a rank be at most half a FIFO (in
// elements and in steps) ahead of what it received, so no send waits for
// space and the exchange cannot deadlock.
//
// Working memory: all_reduce works in recv. reduce_scatter needs room for the
// half of all P blocks it keeps, more than its recv of one block: it uses the
// rank's scratch buffer (prims.buffer(rank)) and runs the schedule once per
// segment of each block (segments of buffer_elems()/P elements).
//
// Across nodes (schedule_args::node_ranks: ranks numbered node by node) with
// P a power of two, all_reduce runs the hypercube on bit-reversed virtual
// ranks: its steps go to partners at distance 1, 2, 4, ... instead of P/2,
// P/4, ..., so the halving's large first exchanges stay inside a node and
// only the last, smallest ones cross nodes (the bytes a hierarchical
// all_reduce sends across, in one collective). The terms of cost() do not
// change; which links they take does.
//
// Determinism: every element's final value is reduced once, by the rank that
// owns it after the halving, in an order fixed by P; the rest are copies.
// all_reduce results are bitwise identical on every rank and across calls.
#pragma once

#include <collx/algo/cost.hpp>
#include <collx/algo/detail/hypercube.hpp>
#include <collx/algo/ids.hpp>
#include <collx/coll.hpp>
#include <collx/config.hpp>
#include <collx/error.hpp>
#include <collx/prims.hpp>

#include <cstddef>

namespace collx::algo {

struct rhd {
  static constexpr algo_id id = algo_id::rhd;
  static constexpr const char* name = collx::name(id);
  static constexpr bool deterministic = true;

  COLLX_HOST_DEVICE static constexpr bool implements(coll c) {
    return c == coll::all_reduce || c == coll::reduce_scatter || c == coll::all_gather;
  }

  /// α-β-γ terms for `bytes` (nccl-tests' size: the buffer for all_reduce,
  /// P blocks for reduce_scatter/all_gather) on P ranks; definitions in
  /// algo/cost.hpp. steps follows the hypercube's Lamport clocks: L halving
  /// and/or L doubling exchanges, starting at 1 on ranks that received a fold-in,
  /// plus the fold-out.
  COLLX_HOST_DEVICE static constexpr cost_terms cost(coll c, int P, double bytes,
                                                     const cost_context& x = {}) {
    if (P <= 1 || !implements(c)) return {0, 0, 0};
    const detail::hypercube h(P);
    const double steps = lamport(h, c != coll::all_gather, c != coll::reduce_scatter);
    if (c == coll::all_reduce) {
      const double f = 1 - 1.0 / h.Pp, extra = h.rem > 0 ? bytes : 0;
      cost_terms t{steps, 2 * f * bytes + extra, f * bytes + extra};
      // Nearest partners first: the steps at distance >= L cross, each way
      // bytes / L − bytes / P per rank; per node 2 · (1 − L / P) · bytes;
      // on the critical path log2(P / L) halving and as many doubling steps.
      if (placed_in_nodes(P, x) && nearest_first(P, x.node_ranks, h)) {
        t.node_bytes = 2 * (1 - double(x.node_ranks) / P) * bytes;
        int across = 0;
        for (int m = x.node_ranks; m < P; m *= 2) ++across;
        t.node_steps = 2.0 * across;
      }
      return t;
    }
    // Block-structured: rank v's part is the blocks of its ranks.
    const double blk = bytes / P;
    auto bnd = [&](int u) { return static_cast<std::size_t>(h.first(u)); };
    // An extra rank sends its fold-in: all P blocks (reduce_scatter) or its own.
    double sent = h.rem > 0 ? blk * (c == coll::reduce_scatter ? P : 1) : 0, reduced = 0;
    for (int v = 0; v < h.Pp; ++v) {
      double s = 0, red = 0;
      for (int st = 0; st < h.L; ++st) {
        detail::span keep, give;
        h.step(v, st, bnd, keep, give);
        if (c == coll::reduce_scatter) {
          s += give.size() * blk;
          red += keep.size() * blk;
        } else {
          s += keep.size() * blk;
        }
      }
      if (h.extra(v) >= 0) {
        s += c == coll::reduce_scatter ? blk : (P - 1) * blk;
        if (c == coll::reduce_scatter) red += P * blk;
      }
      sent = s > sent ? s : sent;
      reduced = red > reduced ? red : reduced;
    }
    cost_terms t{steps, sent, reduced};
    if (c == coll::all_gather && !x.in_place)
      t.local_bytes = bytes / P;  // the own block, copied into place first
    return t;
  }

  static constexpr int max_cost_ranks = 4096;
  // Lamport depth of the halving steps (if `halve`) then the doubling steps
  // (if `dbl`) between the fold-in and the fold-out.
  COLLX_HOST_DEVICE static constexpr int lamport(const detail::hypercube& h, bool halve, bool dbl) {
    if (h.Pp > max_cost_ranks) return 0;
    int clk[max_cost_ranks] = {}, next[max_cost_ranks] = {};
    for (int v = 0; v < h.Pp; ++v) clk[v] = h.extra(v) >= 0 ? 1 : 0;
    for (int k = halve ? 0 : h.L; k < (dbl ? 2 * h.L : h.L); ++k) {
      const int m = k < h.L ? h.mask(k) : h.mask(2 * h.L - 1 - k);
      for (int v = 0; v < h.Pp; ++v) next[v] = clk[v ^ m] + 1 > clk[v] ? clk[v ^ m] + 1 : clk[v];
      for (int v = 0; v < h.Pp; ++v) clk[v] = next[v];
    }
    int steps = 0;
    for (int v = 0; v < h.Pp; ++v) {
      const int end = h.extra(v) >= 0 ? clk[v] + 1 : clk[v];
      steps = end > steps ? end : steps;
    }
    return steps;
  }

  /// all_gather moves ranges that span several blocks, so it is not split
  /// into stripes; the others are (reduce_scatter addresses blocks by a.block()).
  COLLX_HOST_DEVICE static constexpr bool stripe_split(coll c) {
    return c == coll::all_reduce || c == coll::reduce_scatter;
  }

  template <coll C, class Prims, class T>
  COLLX_HOST_DEVICE static status run(Prims& p, const schedule_args<T>& a) {
    static_assert(implements(C), "algo::rhd does not implement this collective (see C above)");
    if constexpr (C == coll::all_reduce) return all_reduce(p, a);
    else if constexpr (C == coll::reduce_scatter) return reduce_scatter(p, a);
    else if constexpr (C == coll::all_gather) return all_gather(p, a);
  }

 private:
  template <class Prims, class T>
  COLLX_HOST_DEVICE static status all_reduce(Prims& p, const schedule_args<T>& a) {
    const int P = a.nranks, r = a.rank;
    const std::size_t n = a.count;
    if (P == 1) return p.local_copy(a.send, a.recv, n, true);
    const detail::hypercube h(P);
    const int v = h.vrank(r);
    if (v < 0) {  // extra rank: fold in, fold out
      COLLX_TRY(p.send(r + 1, a.send, n));
      return p.recv(r + 1, a.recv, n);
    }
    const detail::pace ch = detail::pace_of(p);
    auto bnd = [&](int u) { return n * static_cast<std::size_t>(u) / static_cast<std::size_t>(h.Pp); };
    const int e = h.extra(v);
    const T* src = a.send;
    if (e >= 0) {
      COLLX_TRY(p.recv_reduce_copy(e, a.send, a.recv, n, false));
      src = a.recv;
    }
    // The hypercube coordinate: v, or v bit-reversed across nodes (see above; an involution).
    const bool reversed = nearest_first(P, a.node_ranks, h);
    auto coord = [&](int x) { return reversed ? bit_reverse(x, h.L) : x; };
    const int c = coord(v);
    for (int s = 0; s < h.L; ++s) {
      detail::span keep, give;
      h.step(c, s, bnd, keep, give);
      const int peer = h.stay(coord(c ^ h.mask(s)));
      const bool last = s == h.L - 1;
      COLLX_TRY(detail::paced(
          give, keep, ch, 0, [&](std::size_t x, std::size_t m) { return p.send(peer, src + x, m); },
          [&](std::size_t x, std::size_t m) {
            return p.recv_reduce_copy(peer, src + x, a.recv + x, m, last);
          }));
      src = a.recv;
    }
    COLLX_TRY(doubling(p, h, c, bnd, a.recv, ch, reversed));
    return e >= 0 ? p.send(e, a.recv, n) : status::ok;
  }

  /// Whether all_reduce runs on bit-reversed coordinates: ranks numbered node
  /// by node, at least 2 nodes of 2, and P a power of two (no folded pairs).
  COLLX_HOST_DEVICE static constexpr bool nearest_first(int P, int node_ranks, const detail::hypercube& h) {
    return h.rem == 0 && fills_nodes(P, node_ranks);
  }
  /// x's low `bits` bits in reverse order.
  COLLX_HOST_DEVICE static constexpr int bit_reverse(int x, int bits) {
    int y = 0;
    for (int b = 0; b < bits; ++b) y |= ((x >> b) & 1) << (bits - 1 - b);
    return y;
  }

  // Recursive doubling over element ranges of buf: after it every stay rank holds all of buf.
  // c: the hypercube coordinate; reversed: coordinates are bit-reversed virtual ranks.
  template <class Prims, class Bnd, class T>
  COLLX_HOST_DEVICE static status doubling(Prims& p, const detail::hypercube& h, int c, const Bnd& bnd,
                                           T* buf, detail::pace ch, bool reversed = false) {
    for (int s = h.L - 1; s >= 0; --s) {
      detail::span keep, give;
      h.step(c, s, bnd, keep, give);
      const int q = c ^ h.mask(s);
      const int peer = h.stay(reversed ? bit_reverse(q, h.L) : q);
      COLLX_TRY(detail::paced(
          keep, give, ch, 0, [&](std::size_t x, std::size_t m) { return p.send(peer, buf + x, m); },
          [&](std::size_t x, std::size_t m) { return p.recv(peer, buf + x, m); }));
    }
    return status::ok;
  }

  template <class Prims, class T>
  COLLX_HOST_DEVICE static status all_gather(Prims& p, const schedule_args<T>& a) {
    const int P = a.nranks, r = a.rank;
    const std::size_t c = a.count;
    if (P == 1) return p.local_copy(a.send, a.recv, c, false);
    const detail::hypercube h(P);
    const int v = h.vrank(r);
    const std::size_t pc = static_cast<std::size_t>(P) * c, rc = static_cast<std::size_t>(r) * c;
    if (v < 0) {  // extra rank: its block in, everyone else's out
      COLLX_TRY(p.local_copy(a.send, a.recv + rc, c, false));
      COLLX_TRY(p.send(r + 1, a.send, c));
      COLLX_TRY(p.recv(r + 1, a.recv, rc));
      return p.recv(r + 1, a.recv + rc + c, pc - rc - c);
    }
    COLLX_TRY(p.local_copy(a.send, a.recv + rc, c, false));
    const int e = h.extra(v);
    const std::size_t ec = static_cast<std::size_t>(e) * c;
    if (e >= 0) COLLX_TRY(p.recv(e, a.recv + ec, c));
    auto bnd = [&](int u) { return static_cast<std::size_t>(h.first(u)) * c; };
    COLLX_TRY(doubling(p, h, v, bnd, a.recv, detail::pace_of(p)));
    if (e < 0) return status::ok;
    COLLX_TRY(p.send(e, a.recv, ec));
    return p.send(e, a.recv + ec + c, pc - ec - c);
  }

  template <class Prims, class T>
  COLLX_HOST_DEVICE static status reduce_scatter(Prims& p, const schedule_args<T>& a) {
    const int P = a.nranks, r = a.rank;
    const std::size_t c = a.count, Pz = static_cast<std::size_t>(P);
    if (P == 1) return p.local_copy(a.send, a.recv, c, true);
    const detail::hypercube h(P);
    const int v = h.vrank(r);
    const detail::pace ch = detail::pace_of(p);
    T* w = p.buffer(r);
    const std::size_t seg = p.buffer_elems() / Pz;  // ≥ 1: buffers hold ≥ 1 MiB, P ≤ 4096
    auto bnd = [&](int u) { return static_cast<std::size_t>(h.first(u)); };
    for (std::size_t so = 0; so < c; so += seg) {
      // This segment: elements [so, so+m) of every block; index x = block·m + offset,
      // contiguous in w, strided in send.
      const std::size_t m = c - so < seg ? c - so : seg, all = Pz * m;
      auto in = [&](std::size_t x) { return a.send + (x / m) * a.block() + so + x % m; };
      if (v < 0) {
        COLLX_TRY(detail::paced(
            {0, all}, {}, ch, m, [&](std::size_t x, std::size_t k) { return p.send(r + 1, in(x), k); },
            [](std::size_t, std::size_t) { return status::ok; }));
        COLLX_TRY(p.recv(r + 1, a.recv + so, m));
        continue;
      }
      const int e = h.extra(v);
      if (e >= 0)
        COLLX_TRY(detail::paced(
            {}, {0, all}, ch, m, [](std::size_t, std::size_t) { return status::ok; },
            [&](std::size_t x, std::size_t k) { return p.recv_reduce_copy(e, in(x), w + x, k, false); }));
      for (int s = 0; s < h.L; ++s) {
        detail::span keep, give;
        h.step(v, s, bnd, keep, give);
        const int peer = h.stay(v ^ h.mask(s));
        const bool last = s == h.L - 1, from_send = s == 0 && e < 0;
        auto src = [&](std::size_t x) -> const T* { return from_send ? in(x) : w + x; };
        COLLX_TRY(detail::paced(
            {give.lo * m, give.hi * m}, {keep.lo * m, keep.hi * m}, ch, m,
            [&](std::size_t x, std::size_t k) { return p.send(peer, src(x), k); },
            [&](std::size_t x, std::size_t k) {
              T* dst = last && x / m == static_cast<std::size_t>(r) ? a.recv + so + x % m : w + x;
              return p.recv_reduce_copy(peer, src(x), dst, k, last);
            }));
      }
      if (e >= 0) COLLX_TRY(p.send(e, w + static_cast<std::size_t>(e) * m, m));
    }
    return status::ok;
  }
};

}  // namespace collx::algo
