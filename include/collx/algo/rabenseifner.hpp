// collx/algo/rabenseifner.hpp — Rabenseifner's reduce-scatter + all-gather.
//
// all_reduce is a recursive-halving reduce-scatter over the largest power of
// two P' ≤ P followed by a recursive-doubling all-gather; reduce replaces the
// all-gather by a binomial gather of the reduced parts to the root.
//
// Non-power-of-two P (rem = P - P' pairs of ranks 2i, 2i+1; see
// detail/hypercube.hpp) uses the cheaper pre-step: instead of the even rank
// sending its whole vector to the odd one, the pair exchanges HALVES. The odd
// (staying) rank reduces the half its virtual rank keeps in the first halving
// step, the even (extra) rank reduces the other half and sends it straight to
// the partner virtual rank as that step's contribution, then drops out. At the
// end, the last doubling step sends each half to the extra ranks too. The
// extra rank sends n instead of n (same), but the pair's reduction work and
// the first step are shared, saving one step and n/2 of critical-path traffic
// over folding whole vectors (algo::rhd).
//
// Partners that both send then receive are paced piece by piece (at most half
// a FIFO, in elements and in steps, sent ahead of what was received: see
// detail::paced), so bounded FIFOs cannot deadlock.
//
// reduce relabels ranks so that the root is the staying rank of virtual rank 0
// (the gather's destination). Working memory: all_reduce works in recv;
// reduce works in recv on the root and in the rank's scratch buffer elsewhere
// (recv of non-root ranks must not be written), running the schedule once per
// segment of buffer_elems() elements.
//
// Determinism: every element's final value is reduced once, by the staying
// rank that owns it after the halving, in an order fixed by P; the rest are
// copies. all_reduce results are bitwise identical on every rank and across
// calls.
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

struct rabenseifner {
  static constexpr algo_id id = algo_id::rabenseifner;
  static constexpr const char* name = collx::name(id);
  static constexpr bool deterministic = true;

  COLLX_HOST_DEVICE static constexpr bool implements(coll c) {
    return c == coll::all_reduce || c == coll::reduce;
  }

  /// α-β-γ terms for `bytes` on P ranks. steps: L halving steps and L
  /// doubling (all_reduce) or gather (reduce) steps, plus the pair exchange
  /// when P is not a power of two; see algo/cost.hpp for the exact definitions.
  COLLX_HOST_DEVICE static constexpr cost_terms cost(coll c, int P, double bytes, const cost_context& = {}) {
    if (P <= 1 || !implements(c)) return {0, 0, 0};
    const detail::hypercube h(P);
    auto bnd = [&](int u) { return bytes * u / h.Pp; };
    auto ranges = [&](int v, int s, double& keep, double& give) {
      const int m = h.mask(s), vlo = v & ~(2 * m - 1);
      const double low = bnd(vlo + m) - bnd(vlo), high = bnd(vlo + 2 * m) - bnd(vlo + m);
      keep = (v & m) ? high : low;
      give = (v & m) ? low : high;
    };
    double sent = h.rem > 0 ? bytes : 0, reduced = 0;  // an extra rank: both halves out
    for (int v = 0; v < h.Pp; ++v) {
      double k0 = 0, g0 = 0;
      ranges(v, 0, k0, g0);
      if (h.extra(v) >= 0) reduced = g0 > reduced ? g0 : reduced;  // its extra rank's half
      const int vp = v ^ h.mask(0);
      double s = g0, red = h.extra(v) >= 0 ? 2 * k0 : k0;
      for (int st = 1; st < h.L; ++st) {
        double k = 0, g = 0;
        ranges(v, st, k, g);
        s += g;
        red += k;
        if (c == coll::all_reduce) s += k;
      }
      if (c == coll::all_reduce) {
        s += k0 * (1 + (h.extra(v) >= 0) + (h.extra(vp) >= 0));
      } else if (v != 0) {  // gather: the range held when sending at the lowest set bit
        int st = h.L - 1;
        while ((v & h.mask(st)) == 0) --st;
        double k = 0, g = 0;
        ranges(v, st, k, g);
        s += k;
      }
      sent = s > sent ? s : sent;
      reduced = red > reduced ? red : reduced;
    }
    return {2.0 * h.L + (h.rem > 0 ? 1 : 0), sent, reduced};
  }

  template <coll C, class Prims, class T>
  COLLX_HOST_DEVICE static status run(Prims& p, const schedule_args<T>& a) {
    static_assert(implements(C), "algo::rabenseifner does not implement this collective (see C above)");
    const int P = a.nranks;
    if (P == 1) return p.local_copy(a.send, a.recv, a.count, true);
    const detail::hypercube h(P);
    // Labels: identity for all_reduce; for reduce the root becomes stay(0).
    const int shift = h.rem > 0 ? 1 : 0;
    const int off = C == coll::reduce ? (a.root - shift + P) % P : 0;
    const int q = (a.rank - off + P) % P;
    auto ph = [&](int label) { return (label + off) % P; };
    if constexpr (C == coll::all_reduce) {
      COLLX_TRY(halving(p, h, q, ph, a.count, a.send, a.recv));
      return doubling(p, h, q, ph, a.count, a.recv);
    } else {
      const bool root = a.rank == a.root;
      const std::size_t step = p.buffer_elems();  // the same on every rank
      for (std::size_t so = 0; so < a.count; so += step) {
        const std::size_t m = a.count - so < step ? a.count - so : step;
        T* w = root ? a.recv + so : p.buffer(a.rank);
        COLLX_TRY(halving(p, h, q, ph, m, a.send + so, w));
        COLLX_TRY(gather(p, h, q, ph, m, w));
      }
      return status::ok;
    }
  }

 private:
  // Reduce-scatter of src[0, n) with the halves pre-step; the staying rank of
  // virtual rank v ends with part v of the result (post() applied) in w.
  template <class Prims, class Ph, class T>
  COLLX_HOST_DEVICE static status halving(Prims& p, const detail::hypercube& h, int q, const Ph& ph,
                                          std::size_t n, const T* src, T* w) {
    const detail::pace ch = detail::pace_of(p);
    auto bnd = [&](int u) { return n * static_cast<std::size_t>(u) / static_cast<std::size_t>(h.Pp); };
    auto none = [](std::size_t, std::size_t) { return status::ok; };
    const int v = h.vrank(q);
    if (v < 0) {  // extra rank: exchange halves with its pair, then give its half away
      const int vv = h.vof(q), o = ph(q + 1), to = ph(h.stay(vv ^ h.mask(0)));
      detail::span keep, give;
      h.step(vv, 0, bnd, keep, give);
      COLLX_TRY(detail::paced(
          keep, give, ch, 0, [&](std::size_t x, std::size_t k) { return p.send(o, src + x, k); },
          [&](std::size_t x, std::size_t k) { return p.recv_reduce_copy(o, src + x, w + x, k, false); }));
      return detail::paced(
          give, {}, ch, 0, [&](std::size_t x, std::size_t k) { return p.send(to, w + x, k); }, none);
    }
    for (int s = 0; s < h.L; ++s) {
      detail::span keep, give;
      h.step(v, s, bnd, keep, give);
      const int vp = v ^ h.mask(s), to = ph(h.stay(vp));
      const bool last = s == h.L - 1;
      const T* in = s == 0 ? src : w;
      int from = to;
      if (s == 0) {
        if (h.extra(vp) >= 0) from = ph(h.extra(vp));  // vp's half comes from its extra rank
        if (h.extra(v) >= 0) {  // pre-step with our extra rank; it gives our half for us
          const int e = ph(h.extra(v));
          COLLX_TRY(detail::paced(
              give, keep, ch, 0, [&](std::size_t x, std::size_t k) { return p.send(e, src + x, k); },
              [&](std::size_t x, std::size_t k) { return p.recv_reduce_copy(e, src + x, w + x, k, false); }));
          give = {};
          in = w;
        }
      }
      COLLX_TRY(detail::paced(
          give, keep, ch, 0, [&](std::size_t x, std::size_t k) { return p.send(to, in + x, k); },
          [&](std::size_t x, std::size_t k) { return p.recv_reduce_copy(from, in + x, w + x, k, last); }));
    }
    return status::ok;
  }

  // All-gather of the parts in w[0, n); the last step also serves the extra ranks.
  template <class Prims, class Ph, class T>
  COLLX_HOST_DEVICE static status doubling(Prims& p, const detail::hypercube& h, int q, const Ph& ph,
                                           std::size_t n, T* w) {
    const detail::pace ch = detail::pace_of(p);
    auto bnd = [&](int u) { return n * static_cast<std::size_t>(u) / static_cast<std::size_t>(h.Pp); };
    const int v = h.vrank(q);
    if (v < 0) {  // extra rank: our virtual rank's half from our pair, the other from its partner
      const int vv = h.vof(q);
      detail::span keep, give;
      h.step(vv, 0, bnd, keep, give);
      const int o = ph(q + 1), other = ph(h.stay(vv ^ h.mask(0)));
      return detail::paced(
          keep, give, ch, 0, [&](std::size_t x, std::size_t k) { return p.recv(o, w + x, k); },
          [&](std::size_t x, std::size_t k) { return p.recv(other, w + x, k); });
    }
    for (int s = h.L - 1; s >= 0; --s) {
      detail::span keep, give;
      h.step(v, s, bnd, keep, give);
      const int vp = v ^ h.mask(s), to = ph(h.stay(vp));
      const int e1 = s == 0 && h.extra(v) >= 0 ? ph(h.extra(v)) : -1;
      const int e2 = s == 0 && h.extra(vp) >= 0 ? ph(h.extra(vp)) : -1;
      COLLX_TRY(detail::paced(
          keep, give, ch, 0,
          [&](std::size_t x, std::size_t k) {
            status st = p.send(to, w + x, k);
            if (st == status::ok && e1 >= 0) st = p.send(e1, w + x, k);
            if (st == status::ok && e2 >= 0) st = p.send(e2, w + x, k);
            return st;
          },
          [&](std::size_t x, std::size_t k) { return p.recv(to, w + x, k); }));
    }
    return status::ok;
  }

  // Binomial gather of the parts in w[0, n) to virtual rank 0 (the root).
  template <class Prims, class Ph, class T>
  COLLX_HOST_DEVICE static status gather(Prims& p, const detail::hypercube& h, int q, const Ph& ph,
                                         std::size_t n, T* w) {
    const int v = h.vrank(q);
    if (v < 0) return status::ok;
    const detail::pace ch = detail::pace_of(p);
    auto bnd = [&](int u) { return n * static_cast<std::size_t>(u) / static_cast<std::size_t>(h.Pp); };
    auto none = [](std::size_t, std::size_t) { return status::ok; };
    for (int s = h.L - 1; s >= 0; --s) {
      const int m = h.mask(s), peer = ph(h.stay(v ^ m));
      detail::span keep, give;
      h.step(v, s, bnd, keep, give);
      if ((v & (2 * m - 1)) == m)
        return detail::paced(
            keep, {}, ch, 0, [&](std::size_t x, std::size_t k) { return p.send(peer, w + x, k); }, none);
      COLLX_TRY(detail::paced({}, give, ch, 0, none,
                              [&](std::size_t x, std::size_t k) { return p.recv(peer, w + x, k); }));
    }
    return status::ok;
  }
};

}  // namespace collx::algo
