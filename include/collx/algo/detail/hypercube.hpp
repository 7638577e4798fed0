// collx/algo/detail/hypercube.hpp — what recursive halving/doubling schedules
// (RHD, Rabenseifner) share: the virtual power-of-two group, the ranges each
// step keeps and gives, and paced transfers that cannot deadlock.
//
// P ranks form P' = 2^L virtual ranks (P' the largest power of two ≤ P). The
// first rem = P - P' pairs of ranks (2i, 2i+1) act as one virtual rank i: the
// odd rank "stays" in the hypercube, the even one is the "extra" whose data is
// folded in and out. Other ranks r are virtual rank r - rem.
//
// Ranges: the data is cut into P' parts by a boundary function bnd(v) (element
// offsets, or block indices when the data is per-rank blocks). At step s
// (s = 0 … L-1, partner v ^ mask(s), mask(s) = P' >> (s+1)) virtual rank v
// keeps the half of its current range that holds its own part and gives the
// other half, so after L steps it holds part v.
#pragma once

#include <collx/config.hpp>
#include <collx/error.hpp>
#include <collx/prims.hpp>

#include <cstddef>

namespace collx::algo::detail {

struct span {
  std::size_t lo = 0, hi = 0;
  COLLX_HOST_DEVICE constexpr std::size_t size() const { return hi - lo; }
};

struct hypercube {
  int P = 1, Pp = 1, rem = 0, L = 0;

  COLLX_HOST_DEVICE constexpr explicit hypercube(int nranks) : P(nranks) {
    while (Pp * 2 <= P) {
      Pp *= 2;
      ++L;
    }
    rem = P - Pp;
  }
  /// Virtual rank of physical rank r (-1 for an extra rank).
  COLLX_HOST_DEVICE constexpr int vrank(int r) const {
    return r < 2 * rem ? (r % 2 == 1 ? r / 2 : -1) : r - rem;
  }
  /// The rank that stays in the hypercube for v, and the extra one (or -1).
  COLLX_HOST_DEVICE constexpr int stay(int v) const { return v < rem ? 2 * v + 1 : v + rem; }
  COLLX_HOST_DEVICE constexpr int extra(int v) const { return v < rem ? 2 * v : -1; }
  /// The virtual rank an extra rank belongs to.
  COLLX_HOST_DEVICE constexpr int vof(int r) const { return r < 2 * rem ? r / 2 : r - rem; }
  /// First physical rank of v (its ranks' blocks are [first(v), first(v+1))).
  COLLX_HOST_DEVICE constexpr int first(int v) const { return v < rem ? 2 * v : v + rem; }
  COLLX_HOST_DEVICE constexpr int mask(int s) const { return Pp >> (s + 1); }

  /// Keep and give ranges of v at step s, for boundary function bnd.
  template <class Bnd>
  COLLX_HOST_DEVICE constexpr void step(int v, int s, const Bnd& bnd, span& keep, span& give) const {
    const int m = mask(s), vlo = v & ~(2 * m - 1), vmid = vlo + m, vhi = vlo + 2 * m;
    const span low{bnd(vlo), bnd(vmid)}, high{bnd(vmid), bnd(vhi)};
    keep = (v & m) ? high : low;
    give = (v & m) ? low : high;
  }
};

/// Moves a send range and a receive range piece by piece, alternating one
/// piece out and one piece in, so that two ranks exchanging with each other
/// (both send, then receive) never need more than one piece of FIFO space
/// each. Pieces are at most `chunk` elements and never cross a multiple of
/// `unit` (0: no units) so that they map to contiguous memory. Both ends of a
/// connection cut the same range the same way. send_fn(x, n) / recv_fn(x, n)
/// move elements [x, x+n) of the range's index space.
template <class SendFn, class RecvFn>
COLLX_HOST_DEVICE status paced(span out, span in, std::size_t chunk, std::size_t unit, SendFn&& send_fn,
                               RecvFn&& recv_fn) {
  auto piece = [&](std::size_t x, std::size_t end) {
    std::size_t n = end - x < chunk ? end - x : chunk;
    if (unit != 0 && unit - x % unit < n) n = unit - x % unit;
    return n;
  };
  std::size_t xs = out.lo, xr = in.lo;
  while (xs < out.hi || xr < in.hi) {
    if (xs < out.hi) {
      const std::size_t n = piece(xs, out.hi);
      COLLX_TRY(send_fn(xs, n));
      xs += n;
    }
    if (xr < in.hi) {
      const std::size_t n = piece(xr, in.hi);
      COLLX_TRY(recv_fn(xr, n));
      xr += n;
    }
  }
  return status::ok;
}

}  // namespace collx::algo::detail
