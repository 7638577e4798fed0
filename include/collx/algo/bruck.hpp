// collx/algo/bruck.hpp — Bruck's all_gather.
//
// ⌈log2 P⌉ steps for any P: at step k (distance d = 2^k) rank r, which holds
// the blocks of ranks r, r+1, …, r+d-1 (mod P), sends the first min(d, P-d) of
// them to rank r-d and receives as many from rank r+d. Blocks are received
// straight into their final places in recv (block j at recv + j·count), so the
// classic final rotation is not needed and no scratch is used. Every rank
// sends before it receives (a shift, like a ring), so transfers are paced
// (detail::paced: at most half a FIFO, in elements and in steps, sent ahead
// of what was received).
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

struct bruck {
  static constexpr algo_id id = algo_id::bruck;
  static constexpr const char* name = collx::name(id);
  static constexpr bool deterministic = true;  // no reduction

  COLLX_HOST_DEVICE static constexpr bool implements(coll c) { return c == coll::all_gather; }

  /// α-β-γ terms for `bytes` (P blocks) on P ranks. steps: ⌈log2 P⌉ rounds,
  /// each one hop; every rank sends P-1 blocks; nothing is reduced.
  COLLX_HOST_DEVICE static constexpr cost_terms cost(coll c, int P, double bytes,
                                                     const cost_context& x = {}) {
    if (P <= 1 || !implements(c)) return {0, 0, 0};
    int steps = 0;
    for (int d = 1; d < P; d *= 2) ++steps;
    cost_terms t{double(steps), bytes * (P - 1) / P, 0};
    if (!x.in_place) t.local_bytes = bytes / P;  // the own block, copied into place first
    return t;
  }

  /// May be split into stripes (blocks addressed by a.block()).
  COLLX_HOST_DEVICE static constexpr bool stripe_split(coll c) { return implements(c); }

  template <coll C, class Prims, class T>
  COLLX_HOST_DEVICE static status run(Prims& p, const schedule_args<T>& a) {
    static_assert(implements(C), "algo::bruck does not implement this collective (see C above)");
    const int P = a.nranks, r = a.rank;
    const std::size_t c = a.count, s = a.block(), Pz = static_cast<std::size_t>(P);
    COLLX_TRY(p.local_copy(a.send, a.recv + static_cast<std::size_t>(r) * s, c, false));
    const detail::pace ch = detail::pace_of(p);
    for (int d = 1; d < P; d *= 2) {
      const int to = (r - d + P) % P, from = (r + d) % P;
      const std::size_t cnt = static_cast<std::size_t>(d < P - d ? d : P - d);
      // Index x of a stream starting at block b: block (b + x/c) mod P, offset x mod c.
      auto at = [&](int b, std::size_t x) {
        return a.recv + ((static_cast<std::size_t>(b) + x / c) % Pz) * s + x % c;
      };
      COLLX_TRY(detail::paced(
          {0, cnt * c}, {0, cnt * c}, ch, c,
          [&](std::size_t x, std::size_t k) { return p.send(to, at(r, x), k); },
          [&](std::size_t x, std::size_t k) { return p.recv(from, at(from, x), k); }));
    }
    return status::ok;
  }
};

}  // namespace collx::algo
