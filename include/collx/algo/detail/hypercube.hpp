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

/// How far paced() may send ahead of what it received, per direction: `chunk`
/// elements (half a FIFO) in at most `steps` FIFO steps (half the slots; one
/// step holds `step` = chunk / steps elements, a piece's largest size). Both
/// limits matter: many small pieces (a block per piece) take a step each.
/// short_steps: the most steps a call shorter than one step may take (a
/// proxied transport cuts such calls into up to 4 steps to pipeline them).
struct pace {
  std::size_t chunk = 1, steps = 1, step = 1, short_steps = 1;
};
template <class Prims>
COLLX_HOST_DEVICE pace pace_of(const Prims& p) {
  // Primitives without FIFO slots (an instrumented test harness) limit elements only.
  if constexpr (requires { p.max_round_steps(); }) {
    pace pc{p.max_chunk(), p.max_round_steps(), 1, 1};
    pc.step = pc.chunk / pc.steps > 0 ? pc.chunk / pc.steps : 1;
    if constexpr (requires { p.steps_of(std::size_t{}); })
      if (pc.step > 1) pc.short_steps = p.steps_of(pc.step - 1);
    return pc;
  } else {
    // No step limit: a piece may fill the whole window (it was one element
    // per piece here, millions of messages through a counting harness).
    const std::size_t chunk = p.max_chunk() > 0 ? p.max_chunk() : 1;
    return {chunk, ~std::size_t{0}, chunk, 1};
  }
}

/// Moves a send range and a receive range through one connection each way,
/// as a sliding window: a piece goes out while what this rank has sent and
/// not yet matched by a piece received stays within one pace (half a FIFO, in
/// elements and in steps); otherwise the next piece is received first. Two
/// ranks exchanging with each other (both send, then receive) so never need
/// more than half a FIFO of space per direction: each is at most one pace
/// ahead of what it received, which is at most one pace ahead of what the
/// peer received, so at most a whole FIFO is in flight and no send waits for
/// space. Unlike rounds of half a FIFO out then half in, the window never
/// drains: a piece goes out as soon as one comes in, which keeps a network
/// link busy across what used to be the rounds' boundaries.
/// Pieces are at most one step (pace::chunk / pace::steps elements) and also
/// break at every multiple of `unit` (0: none), so that each maps to
/// contiguous memory. Both ends of a connection cut a range the same way
/// (from its start, units absolute). send_fn(x, n) / recv_fn(x, n) move
/// elements [x, x+n) of the range's index space.
template <class SendFn, class RecvFn>
COLLX_HOST_DEVICE status paced(span out, span in, pace pc, std::size_t unit, SendFn&& send_fn,
                               RecvFn&& recv_fn) {
  const std::size_t step = pc.step > 0 ? pc.step : 1;
  auto piece = [&](std::size_t x, std::size_t lo, std::size_t hi) {
    std::size_t n = hi - x;
    const std::size_t to_step = step - (x - lo) % step;
    if (to_step < n) n = to_step;
    if (unit != 0 && unit - x % unit < n) n = unit - x % unit;
    return n;
  };
  // Steps a piece takes: one for a whole step, up to short_steps for less.
  auto cost = [&](std::size_t n) { return n >= step ? std::size_t{1} : pc.short_steps; };
  std::size_t xs = out.lo, xr = in.lo;
  std::size_t ahead_elems = 0, ahead_steps = 0;  // sent, not yet matched by a piece received
  while (xs < out.hi || xr < in.hi) {
    // Send while the window has room, or unthrottled once nothing is left to
    // receive (the peer then only receives: it drains what this rank sends).
    while (xs < out.hi) {
      const std::size_t n = piece(xs, out.lo, out.hi);
      const std::size_t k = cost(n);
      const bool room = ahead_steps == 0 || (ahead_steps + k <= pc.steps && ahead_elems + n <= pc.chunk);
      if (!room && xr < in.hi) break;
      COLLX_TRY(send_fn(xs, n));
      xs += n;
      ahead_elems += n;
      ahead_steps += k;
    }
    if (xr < in.hi) {
      const std::size_t n = piece(xr, in.lo, in.hi);
      COLLX_TRY(recv_fn(xr, n));
      xr += n;
      const std::size_t k = cost(n);
      ahead_elems = ahead_elems > n ? ahead_elems - n : 0;
      ahead_steps = ahead_steps > k ? ahead_steps - k : 0;
    }
  }
  return status::ok;
}

}  // namespace collx::algo::detail
