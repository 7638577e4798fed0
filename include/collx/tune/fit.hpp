// collx/tune/fit.hpp — fitting t = a + b·x to measured times, as collx-probe
// does to turn sweeps into α and β.
//
// Least squares weighted by 1/t² (each point's squared *relative* residual):
// a sweep from 8 B to 16 MiB spans five decades of time, and unweighted
// least squares would let the largest sizes decide a and leave the latency
// to noise. The fit reports its root-mean-square relative residual, so a
// reader can tell a line from a curve (a protocol whose bandwidth changes
// with size fits badly and says so). Host only.
#pragma once

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

}  // namespace collx::tune
