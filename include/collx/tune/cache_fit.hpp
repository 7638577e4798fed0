// collx/tune/cache_fit.hpp — the cache sizes the model should use, fitted to
// a working-set sweep, as collx-probe measures them instead of taking what
// the machine reports.
//
// What a machine reports can be wrong for this purpose: a virtual machine's
// CPUID may announce an L3 of 508 MiB where copies slow down past about
// 32 MiB, and a last level the model believes 30 times too large never
// prices a byte at memory's rate. So the probe copies buffers of growing
// working sets (bytes read plus bytes written, every thread together) and
// fits the model's own cache form to the rates it sees (tune/model.hpp):
//
//   seconds per byte(ws) = x_in + cache_miss(near, ws) · x_near + cache_miss(last, ws) · x_mem
//
// For every pair of candidate sizes near < last on a grid of quarter
// octaves inside the sweep, non-negative least squares (relative residuals)
// gives the three rates; the pair with the smallest residual wins. The sizes
// come out as the model needs them (where the smooth form 1 − cache / ws
// matches the measured fall best), not necessarily the datasheet's. A level
// whose extra time is under `min_share` of the time at the sweep's largest
// working set did not show: its size is reported as 0 (no such level). Host
// only.
#pragma once

#include <collx/error.hpp>
#include <collx/tune/fit.hpp>
#include <collx/tune/model.hpp>

#include <cmath>
#include <string>
#include <vector>

namespace collx::tune {

/// One size of a sweep: the working set (bytes read plus bytes written by
/// every thread) and the rate it was copied at (bytes copied per second, in
/// GB/s; any consistent measure of rate works).
struct cache_point {
  double working_set = 0;
  double gbps = 0;
};

/// Two cache levels as the model prices them (profile::near_cache_bytes,
/// cache_bytes), with the rates the sweep showed for them.
struct cache_levels {
  double near_bytes = 0;  // the level below the last (0: none showed)
  double last_bytes = 0;  // the last level (0: none showed)
  double in_gbps = 0;     // the rate while the working set fits the near cache
  double near_gbps = 0;   // the extra rate a byte that misses near pays (0: none)
  double mem_gbps = 0;    // the extra rate a byte that misses the last level pays (0: none)
  double rms_rel_residual = 0;
  std::size_t points = 0;
};

namespace cache_fit_detail {

struct trial {
  double x[3] = {0, 0, 0};  // ns per byte: in cache, near miss, last-level miss
  double residual = 1e300;
};

// NNLS for the three per-byte times with the two sizes fixed, each row
// divided by its measured time (relative residuals).
inline trial fit_pair(const std::vector<cache_point>& s, double near, double last) {
  const std::size_t m = s.size();
  std::vector<double> A(m * 3), b(m, 1);
  for (std::size_t i = 0; i < m; ++i) {
    const double y = 1 / s[i].gbps;  // ns per byte
    A[i * 3 + 0] = 1 / y;
    A[i * 3 + 1] = cache_miss(near, s[i].working_set) / y;
    A[i * 3 + 2] = cache_miss(last, s[i].working_set) / y;
  }
  trial t;
  const std::vector<double> x = fit_detail::nnls(A, b, m, 3);
  double ss = 0;
  for (std::size_t i = 0; i < m; ++i) {
    const double r = A[i * 3] * x[0] + A[i * 3 + 1] * x[1] + A[i * 3 + 2] * x[2] - 1;
    ss += r * r;
  }
  for (int k = 0; k < 3; ++k) t.x[k] = x[std::size_t(k)];
  t.residual = std::sqrt(ss / double(m));
  return t;
}

}  // namespace cache_fit_detail

/// Fits two cache levels to a sweep (see the header comment). Errors:
/// invalid_argument on fewer than 4 points, or a working set or rate that is
/// not a positive finite number.
inline cache_levels fit_cache_levels(const std::vector<cache_point>& sweep, double min_share = 0.1) {
  require(sweep.size() >= 4, "tune::fit_cache_levels",
          "needs at least 4 working sets, got " + std::to_string(sweep.size()));
  double lo = 1e300, hi = 0;
  for (const cache_point& p : sweep) {
    require(std::isfinite(p.working_set) && p.working_set > 0 && std::isfinite(p.gbps) && p.gbps > 0,
            "tune::fit_cache_levels",
            "working sets and rates must be positive and finite, got " + std::to_string(p.working_set) +
                " B at " + std::to_string(p.gbps) + " GB/s");
    lo = std::min(lo, p.working_set), hi = std::max(hi, p.working_set);
  }
  // Candidate sizes: quarter octaves from the smallest working set to half
  // the largest (a level at or beyond the largest is not seen), and 0 for
  // "no such level".
  std::vector<double> grid{0};
  for (double c = lo; c <= hi / 2 * 1.0001; c *= std::pow(2.0, 0.25)) grid.push_back(c);
  cache_fit_detail::trial best;
  double best_near = 0, best_last = 0;
  for (std::size_t i = 0; i < grid.size(); ++i)
    for (std::size_t j = i + 1; j < grid.size(); ++j) {
      const cache_fit_detail::trial t = cache_fit_detail::fit_pair(sweep, grid[i], grid[j]);
      if (t.residual < best.residual * (1 - 1e-9)) best = t, best_near = grid[i], best_last = grid[j];
    }
  cache_levels r;
  r.points = sweep.size();
  r.rms_rel_residual = best.residual;
  // A level that adds little at the largest working set did not show.
  const double total =
      best.x[0] + cache_miss(best_near, hi) * best.x[1] + cache_miss(best_last, hi) * best.x[2];
  const bool near_shows = best_near > 0 && cache_miss(best_near, hi) * best.x[1] >= min_share * total;
  const bool last_shows = cache_miss(best_last, hi) * best.x[2] >= min_share * total;
  r.in_gbps = best.x[0] > 0 ? 1 / best.x[0] : 0;
  if (near_shows) r.near_bytes = best_near, r.near_gbps = 1 / best.x[1];
  if (last_shows) r.last_bytes = best_last, r.mem_gbps = 1 / best.x[2];
  // One level only: it is the last one.
  if (near_shows && !last_shows)
    r.last_bytes = r.near_bytes, r.mem_gbps = r.near_gbps, r.near_bytes = 0, r.near_gbps = 0;
  return r;
}

}  // namespace collx::tune
