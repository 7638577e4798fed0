// collx/algo/bruck_a2a.hpp — Bruck's all_to_all for small messages.
//
// ceil(log2 P) rounds instead of P-1 peers: block i of rank r (the block for
// rank r+i) travels by the binary digits of i. In round k rank r sends every
// block whose index has bit k set to r+2^k and receives the same indices from
// r-2^k, in place. Each block thus crosses popcount(i) links: about log2(P)/2
// times the data of the direct exchange, over log2(P) peers instead of P-1.
//
// The working array is the receive buffer itself, with block i of rank r kept
// at position (r-i) mod P: the initial rotation is one local copy per block and
// no final rotation is needed, because after the last round block i holds the
// data of rank r-i. Blocks move one call (at most p.max_chunk() elements) at a
// time, send then receive, so both ends of every connection make the same calls
// in the same order and the bounded FIFOs cannot deadlock (see direct.hpp).
//
// Cost: each block exchange waits for the peer's block before the next is
// sent, so a round of m blocks is m message latencies, not one; about
// (P/2)·log2(P) in all (cost() counts them exactly). Sending a round's blocks
// back to back would make it one latency, but needs to know how many calls the
// FIFO holds (each call takes at least one slot), which the primitives do not
// say; until they do, direct's all_to_all (one latency) is the small-message
// choice too.
#pragma once

#include <collx/algo/cost.hpp>
#include <collx/algo/ids.hpp>
#include <collx/coll.hpp>
#include <collx/config.hpp>
#include <collx/error.hpp>
#include <collx/prims.hpp>

#include <cstddef>

namespace collx::algo {

struct bruck_a2a {
  static constexpr algo_id id = algo_id::bruck_a2a;
  static constexpr const char* name = collx::name(id);

  COLLX_HOST_DEVICE static constexpr bool implements(coll c) { return c == coll::all_to_all; }

  /// `bytes` is one rank's whole send buffer (P blocks), as nccl-tests counts
  /// it. Steps and bytes count block exchanges: in the round of bit b, every
  /// index i in [1, P) with bit b set (P/2 per round when P is a power of two).
  COLLX_HOST_DEVICE static constexpr cost_terms cost(coll c, int P, double bytes, const cost_context& = {}) {
    if (P <= 1 || !implements(c)) return {0, 0, 0};
    double exchanges = 0;
    for (int bit = 1; bit < P; bit <<= 1)
      for (int i = bit; i < P; ++i)
        if (i & bit) ++exchanges;
    cost_terms t{exchanges, exchanges * bytes / P, 0};
    t.local_bytes = bytes;  // the blocks rotated into place
    return t;
  }

  /// May be split into stripes (blocks addressed by a.block()).
  COLLX_HOST_DEVICE static constexpr bool stripe_split(coll c) { return implements(c); }

  template <coll C, class Prims, class T>
  COLLX_HOST_DEVICE static status run(Prims& p, const schedule_args<T>& a) {
    static_assert(implements(C), "algo::bruck_a2a does not implement this collective (see C above)");
    const int P = a.nranks, r = a.rank;
    const std::size_t c = a.count, s = a.block(), chunk = p.max_chunk();
    if (c == 0) return status::ok;
    auto block = [&](int i) { return static_cast<std::size_t>((r - i + P) % P) * s; };  // where block i lives
    for (int i = 0; i < P; ++i)
      COLLX_TRY(
          p.local_copy(a.send + static_cast<std::size_t>((r + i) % P) * s, a.recv + block(i), c, false));
    for (int bit = 1; bit < P; bit <<= 1) {
      const int to = (r + bit) % P, from = (r - bit + P) % P;
      for (int i = bit; i < P; ++i) {
        if ((i & bit) == 0) continue;
        T* b = a.recv + block(i);
        for (std::size_t off = 0; off < c; off += chunk) {
          const std::size_t n = c - off < chunk ? c - off : chunk;
          COLLX_TRY(p.send(to, b + off, n));  // copied out before the peer's block lands here
          COLLX_TRY(p.recv(from, b + off, n));
        }
      }
    }
    return status::ok;
  }
};

}  // namespace collx::algo
