// collx/tune/fit.hpp — fitting t = a + b·x to measured times, as collx-probe
// does to turn sweeps into α and β.
//
// Least squares weighted by 1/t² (each point's squared *relative* residual):
// a sweep from 8 B to 16 MiB spans five decades of time, and unweighted
// least squares would let the largest sizes decide a and leave the latency
// to noise. The fit reports its root-mean-square relative residual, so a
// reader can tell a line from a curve (a protocol whose bandwidth changes
// with size fits badly and says so).
//
// fit_profile() fits a whole one-node profile (tune/model.hpp) at once to
// timed calls of any variants: the model is linear in (α, 1/bw and the
// oversubscribed step per protocol, barrier, 1/peer, 1/single copy, 1/copy,
// 1/memory, 1/near cache, the per-call costs) once each
// call's cost terms are known, so non-negative least squares (Lawson-Hanson,
// same 1/t² weights) finds the parameters that explain every measurement
// together, instead of each from the one schedule that isolates it. γ is not
// fitted but taken from the start (collx-probe measures it in its own
// process): a reduction costs what it adds beyond its operand's transfer
// (tune/model.hpp), which is not linear in the rates; the fit prices it
// under its previous pass's rates and fits again until the rates settle
// (at most 100 passes). The copy rate may be held the same way
// (fit_options::hold_copy): a probe measures memcpy in its own process, and
// the schedules it times to fit the rest may not tell copies from peer loads
// apart (staged nvls copies into its staging buffer and out of the peers' in
// the same proportion at every size), where the fit would split the two
// arbitrarily. Host only.
#pragma once

#include <collx/algo/cost.hpp>
#include <collx/error.hpp>
#include <collx/proto/list.hpp>
#include <collx/tune/model.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <vector>

namespace collx::tune {

/// t = a + b·x and how well it fits.
struct line_fit {
  double a = 0, b = 0;
  double rms_rel_residual = 0;  // sqrt(mean(((a + b·x − t) / t)²))
  std::size_t points = 0;
  bool ok = false;  // at least two distinct x and positive times
};

/// Fits t = a + b·x to (x[i], t[i]), weights 1/t[i]².
inline line_fit fit_line(const std::vector<double>& x, const std::vector<double>& t) {
  line_fit f;
  f.points = x.size() < t.size() ? x.size() : t.size();
  double sw = 0, sx = 0, st = 0, sxx = 0, sxt = 0;
  for (std::size_t i = 0; i < f.points; ++i) {
    if (!(t[i] > 0)) return f;
    const double w = 1 / (t[i] * t[i]);
    sw += w, sx += w * x[i], st += w * t[i], sxx += w * x[i] * x[i], sxt += w * x[i] * t[i];
  }
  const double det = sw * sxx - sx * sx;
  if (f.points < 2 || !(std::fabs(det) > 1e-300 * sw * sxx)) return f;
  f.b = (sw * sxt - sx * st) / det;
  f.a = (st - f.b * sx) / sw;
  double ss = 0;
  for (std::size_t i = 0; i < f.points; ++i) {
    const double r = (f.a + f.b * x[i] - t[i]) / t[i];
    ss += r * r;
  }
  f.rms_rel_residual = std::sqrt(ss / double(f.points));
  f.ok = std::isfinite(f.a) && std::isfinite(f.b);
  return f;
}

/// One measured call: what its schedule did (A::cost with the call's
/// context), on which protocol channel, whether ranks outnumbered CPUs, its
/// time in µs, and the shares of its bytes that missed the caches
/// (cache_miss of its working set under the profile's cache sizes).
struct timed_call {
  algo::cost_terms terms;
  int channel = 0;
  bool oversubscribed = false;
  double us = 0;
  double miss = 0;
  double cpu_share = 1;      // problem::cpu_share
  bool single_copy = false;  // problem::single_copy: peer bytes read in place
  double near_miss = 0;      // share of its bytes that missed the near cache
  double fill_bytes = 0;     // tune::fill_bytes(terms, the protocol's granule)
  double weight = 1;         // its share in the fit (fit_options::robust_rel sets it)

  /// The call as price_one_node takes it (no contention).
  constexpr call_shape shape() const {
    return {channel, oversubscribed, miss, near_miss, cpu_share, single_copy, fill_bytes};
  }
};

/// The timed call of a schedule whose terms are t, on protocol channel ch,
/// run as problem q asks, `us` long, with the cache shares under the cache
/// sizes of profile m (only those are read).
inline timed_call timed(const algo::cost_terms& t, int ch, const problem& q, double us, const profile& m) {
  const double ws = working_set_bytes(q.kind, q.nranks, q.bytes);
  return {t,
          ch,
          q.oversubscribed,
          us,
          cache_miss(m.cache_bytes, ws),
          q.cpu_share,
          q.single_copy,
          cache_miss(m.near_cache_bytes, ws),
          fill_bytes(t, q.granules[ch])};
}

/// The same for variant <A, Pr>.
template <class A, class Pr>
timed_call timed(const problem& q, double us, const profile& m) {
  constexpr int ch = proto::channel_of<Pr>;
  return timed(A::cost(q.kind, q.nranks, q.bytes, {q.chunks[ch], q.single_copy, q.peer_buffer_bytes}), ch, q,
               us, m);
}

/// What fit_profile holds at start's values instead of fitting.
struct fit_options {
  /// copy_gbps (staged and local copies): priced at start's rate and taken
  /// off the measured times, as γ always is.
  bool hold_copy = false;
  /// > 0: a call whose relative residual exceeds this counts less, as in
  /// Huber's loss (iteratively reweighted: weight² = robust_rel / |residual|),
  /// so that a few calls many times their usual length (a rank descheduled
  /// under load) do not pull every rate toward them. Under one busy loop per
  /// CPU, one hog run's refit judged on the other picked within 10 % at 3 and
  /// 14 of 24 sizes plain, 8 and 14 with 0.2 (replayed); on quiet pairs it
  /// moved by -2 to +2 (bench/results/tuner_quality_min_time_2026-12-07/).
  double robust_rel = 0;
};

/// The robust_rel collx-probe's refit (the profile it saves) and
/// collx-probe-replay's use.
inline constexpr double probe_robust_rel = 0.2;

/// A fitted profile and how well it explains the calls.
struct profile_fit {
  profile model{};
  double rms_rel_residual = 0;
  std::size_t points = 0;
  int identified = 0;  // parameters some call exercised (the others kept start's)
};

namespace fit_detail {

// Solves the n×n system M x = v (Gaussian elimination, partial pivoting);
// false if singular.
inline bool solve(std::vector<double> M, std::vector<double> v, std::size_t n, std::vector<double>& x) {
  for (std::size_t c = 0; c < n; ++c) {
    std::size_t p = c;
    for (std::size_t r = c + 1; r < n; ++r)
      if (std::fabs(M[r * n + c]) > std::fabs(M[p * n + c])) p = r;
    if (!(std::fabs(M[p * n + c]) > 1e-12)) return false;
    if (p != c) {
      for (std::size_t k = 0; k < n; ++k) std::swap(M[c * n + k], M[p * n + k]);
      std::swap(v[c], v[p]);
    }
    for (std::size_t r = c + 1; r < n; ++r) {
      const double f = M[r * n + c] / M[c * n + c];
      for (std::size_t k = c; k < n; ++k) M[r * n + k] -= f * M[c * n + k];
      v[r] -= f * v[c];
    }
  }
  x.assign(n, 0);
  for (std::size_t c = n; c-- > 0;) {
    double acc = v[c];
    for (std::size_t k = c + 1; k < n; ++k) acc -= M[c * n + k] * x[k];
    x[c] = acc / M[c * n + c];
  }
  return true;
}

// Non-negative least squares: argmin |A x − b| with x ≥ 0 (A is m×n, row
// major), by Lawson and Hanson's active set method.
inline std::vector<double> nnls(const std::vector<double>& A, const std::vector<double>& b, std::size_t m,
                                std::size_t n) {
  std::vector<double> x(n, 0), AtA(n * n, 0), Atb(n, 0);
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = 0; j < n; ++j) {
      Atb[j] += A[i * n + j] * b[i];
      for (std::size_t k = 0; k < n; ++k) AtA[j * n + k] += A[i * n + j] * A[i * n + k];
    }
  std::vector<bool> passive(n, false);
  auto gradient = [&] {  // Aᵀ(b − A x) = Aᵀb − AᵀA x
    std::vector<double> w(n);
    for (std::size_t j = 0; j < n; ++j) {
      w[j] = Atb[j];
      for (std::size_t k = 0; k < n; ++k) w[j] -= AtA[j * n + k] * x[k];
    }
    return w;
  };
  // The unconstrained solution on the passive set (zeros elsewhere).
  auto solve_passive = [&](std::vector<double>& z) {
    std::vector<std::size_t> idx;
    for (std::size_t j = 0; j < n; ++j)
      if (passive[j]) idx.push_back(j);
    std::vector<double> M(idx.size() * idx.size()), v(idx.size()), y;
    for (std::size_t r = 0; r < idx.size(); ++r) {
      v[r] = Atb[idx[r]];
      for (std::size_t c = 0; c < idx.size(); ++c) M[r * idx.size() + c] = AtA[idx[r] * n + idx[c]];
    }
    z.assign(n, 0);
    if (!solve(M, v, idx.size(), y)) return false;
    for (std::size_t r = 0; r < idx.size(); ++r) z[idx[r]] = y[r];
    return true;
  };
  constexpr double tol = 1e-10;
  for (std::size_t outer = 0; outer < 3 * n; ++outer) {
    const std::vector<double> w = gradient();
    std::size_t best = n;
    for (std::size_t j = 0; j < n; ++j)
      if (!passive[j] && w[j] > tol && (best == n || w[j] > w[best])) best = j;
    if (best == n) break;
    passive[best] = true;
    for (std::size_t inner = 0; inner < 3 * n; ++inner) {
      std::vector<double> z;
      if (!solve_passive(z)) {
        passive[best] = false;  // a column dependent on the others: leave it out
        break;
      }
      bool feasible = true;
      for (std::size_t j = 0; j < n; ++j) feasible = feasible && (!passive[j] || z[j] > tol);
      if (feasible) {
        x = z;
        break;
      }
      double step = 1;
      for (std::size_t j = 0; j < n; ++j)
        if (passive[j] && z[j] <= tol) step = std::min(step, x[j] / (x[j] - z[j]));
      for (std::size_t j = 0; j < n; ++j) {
        x[j] += step * (z[j] - x[j]);
        if (passive[j] && x[j] <= tol) passive[j] = false, x[j] = 0;
      }
    }
  }
  return x;
}

// One linear fit: every parameter but γ (start's, measured apart), with the
// reductions' time priced under `rates` and taken off the measured times.
inline profile_fit fit_once(const std::vector<timed_call>& calls, const profile& start, const profile& rates,
                            const fit_options& opt) {
  constexpr std::size_t C = proto::channel_count;
  // Columns: α[C], 1/bw[C], oversubscribed step[C] (steps and barriers when
  // ranks outnumber CPUs), then the scalars below (start's cache sizes are kept).
  enum : std::size_t { barrier = 3 * C, peer, single, copy, memory, near, call, oversub_call, n };
  const std::size_t m = calls.size();
  std::vector<double> A(m * n, 0), b(m, 0);
  for (std::size_t i = 0; i < m; ++i) {
    const timed_call& c = calls[i];
    const algo::cost_terms& t = c.terms;
    double* row = &A[i * n];
    const std::size_t ch = static_cast<std::size_t>(c.channel);
    if (c.oversubscribed) {
      row[2 * C + ch] = t.steps + t.barriers * oversubscribed_barrier_switches(c.cpu_share);
      row[oversub_call] = 1;
    } else {
      row[ch] = t.steps;
      row[barrier] = t.barriers;
      row[call] = 1;
    }
    const double kb = (c.cpu_share > 0 && c.cpu_share < 1 ? 1 / c.cpu_share : 1) / 1e3;  // per byte
    row[C + ch] = (t.bytes_sent + c.fill_bytes) * kb;
    row[c.single_copy ? single : peer] = t.peer_bytes * kb;
    const double copied = (t.staged_bytes + t.local_bytes) * kb;
    double held_us = 0;  // what the held rates price, taken off the measured time
    if (!opt.hold_copy) row[copy] = copied;
    else held_us += copied / start.copy_gbps;  // > 0: fit_profile checks
    const double touched = algo::touched_bytes(t);
    row[memory] = c.miss * touched * kb;
    row[near] = c.near_miss * touched * kb;
    const double w = c.us > 0 ? c.weight / c.us : 0;  // relative residuals
    for (std::size_t j = 0; j < n; ++j) row[j] *= w;
    algo::cost_terms reduced_only{};
    reduced_only.bytes_reduced = t.bytes_reduced;
    reduced_only.bytes_sent = t.bytes_sent;  // the operand's transfer (not priced here)
    reduced_only.peer_bytes = t.peer_bytes;
    const prediction pr =
        price_one_node(rates, reduced_only, {c.channel, c.oversubscribed, 0, 0, c.cpu_share, c.single_copy});
    b[i] = (c.us - pr.reduction_us - held_us) * w;
  }
  // Unit columns, so that steps (~1) and kilobytes (~1e4) weigh alike.
  std::array<double, n> norm{};
  for (std::size_t j = 0; j < n; ++j) {
    for (std::size_t i = 0; i < m; ++i) norm[j] += A[i * n + j] * A[i * n + j];
    norm[j] = std::sqrt(norm[j]);
    for (std::size_t i = 0; i < m && norm[j] > 0; ++i) A[i * n + j] /= norm[j];
  }
  std::vector<double> x = fit_detail::nnls(A, b, m, n);
  for (std::size_t j = 0; j < n; ++j) x[j] = norm[j] > 0 ? x[j] / norm[j] : 0;

  profile_fit f;
  f.points = m;
  profile& p = f.model;
  p = start;
  auto known = [&](std::size_t j) { return norm[j] > 0 && x[j] > 0; };
  std::array<double, C> alpha{}, gbps{}, over{};
  for (std::size_t ch = 0; ch < C; ++ch) {
    alpha[ch] = known(ch) ? x[ch] : start.alpha_us(start.intra, int(ch));
    gbps[ch] = known(C + ch) ? 1 / x[C + ch] : start.gbps(start.intra, int(ch));
    over[ch] = known(2 * C + ch) ? x[2 * C + ch] : start.oversub_step_us + start.proto[ch].oversub_extra_us;
  }
  for (std::size_t j = 0; j < n; ++j) f.identified += known(j);
  const double a0 = *std::min_element(alpha.begin(), alpha.end());
  const double g0 = *std::max_element(gbps.begin(), gbps.end());
  const double o0 = *std::min_element(over.begin(), over.end());
  p.intra = {start.intra.kind, a0, g0};
  p.oversub_step_us = o0;
  for (std::size_t ch = 0; ch < C; ++ch)
    p.proto[ch] = {alpha[ch] - a0, g0 > 0 ? gbps[ch] / g0 : 0, over[ch] - o0};
  if (known(barrier)) p.barrier_us = x[barrier];
  if (known(peer)) p.peer_gbps = 1 / x[peer];
  if (known(single)) p.single_copy_gbps = 1 / x[single];
  if (known(copy)) p.copy_gbps = 1 / x[copy];
  if (known(memory)) p.mem_gbps = 1 / x[memory];
  if (known(near)) p.near_gbps = 1 / x[near];
  if (known(call)) p.call_us = x[call];
  if (known(oversub_call)) p.oversub_call_us = x[oversub_call];
  return f;
}

}  // namespace fit_detail

/// How well profile p explains the calls: the rms of (predicted − measured) /
/// measured, predicted by the model's one-node formula (tune/model.hpp).
inline double rms_rel_residual(const profile& p, const std::vector<timed_call>& calls) {
  double ss = 0;
  for (const timed_call& c : calls) {
    const double pred = price_one_node(p, c.terms, c.shape()).total_us();
    const double r = c.us > 0 ? (pred - c.us) / c.us : 0;
    ss += r * r;
  }
  return calls.empty() ? 0 : std::sqrt(ss / double(calls.size()));
}

/// Fits a one-node profile to `calls` (see the header comment); parameters
/// that no call exercises, or that come out 0 (an infinite rate), keep
/// `start`'s values, and so do those `opt` holds. The link is the fastest
/// protocol's α and bandwidth, the other protocols offsets and shares of them.
/// Errors: invalid_argument where opt holds a rate that start does not have
/// (a copy rate that is not positive would price every copy at nothing).
inline profile_fit fit_profile(const std::vector<timed_call>& calls, const profile& start,
                               const fit_options& opt = {}) {
  require(!opt.hold_copy || start.copy_gbps > 0, "tune::fit_profile",
          "hold_copy needs the start profile's copy_gbps (> 0), got " + std::to_string(start.copy_gbps));
  require(opt.robust_rel >= 0 && std::isfinite(opt.robust_rel), "tune::fit_profile",
          "robust_rel must be finite and >= 0, got " + std::to_string(opt.robust_rel));
  // The reductions' time depends on the fitted rates (what a reduction adds
  // beyond its operand's transfer): fit again under the last fit's rates
  // until they settle.
  profile_fit f = fit_detail::fit_once(calls, start, start, opt);
  for (int pass = 0; pass < 100; ++pass) {
    profile_fit next = fit_detail::fit_once(calls, start, f.model, opt);
    bool settled =
        std::fabs(next.model.peer_gbps - f.model.peer_gbps) <= 1e-12 * f.model.peer_gbps &&
        std::fabs(next.model.single_copy_gbps - f.model.single_copy_gbps) <= 1e-12 * f.model.single_copy_gbps;
    for (int ch = 0; ch < proto::channel_count; ++ch) {
      const double a = next.model.gbps(next.model.intra, ch), b = f.model.gbps(f.model.intra, ch);
      settled = settled && std::fabs(a - b) <= 1e-12 * b;
    }
    f = next;
    if (settled) break;
  }
  if (opt.robust_rel > 0) {
    std::vector<timed_call> weighted = calls;
    for (int round = 0; round < 10; ++round) {
      for (timed_call& c : weighted) {
        if (!(c.us > 0)) continue;  // weighs nothing in the fit anyway
        const double r = std::fabs(price_one_node(f.model, c.terms, c.shape()).total_us() - c.us) / c.us;
        c.weight = r > opt.robust_rel ? std::sqrt(opt.robust_rel / r) : 1;
      }
      for (int pass = 0; pass < 20; ++pass) f = fit_detail::fit_once(weighted, start, f.model, opt);
    }
  }
  f.rms_rel_residual = rms_rel_residual(f.model, calls);
  return f;
}

}  // namespace collx::tune
