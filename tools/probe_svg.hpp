// tools/probe_svg.hpp — collx-probe --plot: measured and predicted time per
// variant against size, one SVG per collective and rank count.
//
// Log-log axes (bytes, µs); each variant has one colour, its measured times
// a solid line with dots, its predictions a dashed line; the tuner's pick at
// each size is ringed. Plain SVG 1.1 text, no script, no external resources.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

namespace collx::probe {

/// One variant's curves: size → µs.
struct svg_series {
  std::string name;
  std::map<double, double> measured, predicted;
};

inline std::string svg_plot(const std::string& title, const std::vector<svg_series>& series,
                            const std::map<double, std::string>& picks) {
  constexpr double W = 900, H = 560, L = 70, R = 200, T = 40, B = 50;
  double x0 = 1e300, x1 = 0, y0 = 1e300, y1 = 0;
  for (const svg_series& s : series)
    for (const auto* m : {&s.measured, &s.predicted})
      for (auto [x, y] : *m)
        if (x > 0 && y > 0 && std::isfinite(y))
          x0 = std::min(x0, x), x1 = std::max(x1, x), y0 = std::min(y0, y), y1 = std::max(y1, y);
  if (!(x1 > 0)) return "<svg xmlns=\"http://www.w3.org/2000/svg\"/>\n";
  const double lx0 = std::floor(std::log10(x0)), lx1 = std::ceil(std::log10(x1)) + (x0 == x1);
  const double ly0 = std::floor(std::log10(y0)), ly1 = std::ceil(std::log10(y1)) + (y0 == y1);
  auto px = [&](double x) { return L + (std::log10(x) - lx0) / (lx1 - lx0) * (W - L - R); };
  auto py = [&](double y) { return H - B - (std::log10(y) - ly0) / (ly1 - ly0) * (H - T - B); };
  std::string o;
  char b[512];
  std::snprintf(
      b, sizeof b,
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" font-family=\"sans-serif\" "
      "font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
      "<text x=\"%.0f\" y=\"24\" font-size=\"15\">%s</text>\n",
      W, H, L, title.c_str());
  o += b;
  for (double e = lx0; e <= lx1; ++e) {
    std::snprintf(
        b, sizeof b,
        "<line x1=\"%.1f\" y1=\"%.0f\" x2=\"%.1f\" y2=\"%.0f\" stroke=\"#ddd\"/><text x=\"%.1f\" y=\"%.0f\" "
        "text-anchor=\"middle\">1e%.0f</text>\n",
        px(std::pow(10, e)), T, px(std::pow(10, e)), H - B, px(std::pow(10, e)), H - B + 16, e);
    o += b;
  }
  for (double e = ly0; e <= ly1; ++e) {
    std::snprintf(
        b, sizeof b,
        "<line x1=\"%.0f\" y1=\"%.1f\" x2=\"%.0f\" y2=\"%.1f\" stroke=\"#ddd\"/><text x=\"%.0f\" y=\"%.1f\" "
        "text-anchor=\"end\">1e%.0f</text>\n",
        L, py(std::pow(10, e)), W - R, py(std::pow(10, e)), L - 6, py(std::pow(10, e)) + 4, e);
    o += b;
  }
  std::snprintf(b, sizeof b,
                "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">bytes</text>\n<text x=\"16\" y=\"%.0f\" "
                "transform=\"rotate(-90 16 %.0f)\" text-anchor=\"middle\">us (solid: measured, dashed: "
                "predicted)</text>\n",
                (L + W - R) / 2, H - 12, (T + H - B) / 2, (T + H - B) / 2);
  o += b;
  static const char* colours[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
                                  "#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#000000", "#aec7e8",
                                  "#ffbb78", "#98df8a", "#ff9896", "#c5b0d5"};
  for (std::size_t i = 0; i < series.size(); ++i) {
    const svg_series& s = series[i];
    const char* c = colours[i % (sizeof colours / sizeof *colours)];
    for (int pred = 0; pred < 2; ++pred) {
      std::string pts;
      for (auto [x, y] : pred ? s.predicted : s.measured)
        if (x > 0 && y > 0 && std::isfinite(y)) {
          std::snprintf(b, sizeof b, "%.1f,%.1f ", px(x), py(y));
          pts += b;
        }
      o += "<polyline fill=\"none\" stroke=\"" + std::string(c) + "\" stroke-width=\"1.5\"" +
           (pred ? " stroke-dasharray=\"5,4\"" : "") + " points=\"" + pts + "\"/>\n";
    }
    for (auto [x, y] : s.measured) {
      const auto p = picks.find(x);
      const bool picked = p != picks.end() && p->second == s.name;
      std::snprintf(
          b, sizeof b,
          "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"%d\" fill=\"%s\" stroke=\"black\" stroke-width=\"%d\"/>\n",
          px(x), py(y), picked ? 5 : 2, c, picked ? 1 : 0);
      o += b;
    }
    std::snprintf(b, sizeof b,
                  "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"%s\" "
                  "stroke-width=\"2\"/><text x=\"%.0f\" "
                  "y=\"%.0f\">%s</text>\n",
                  W - R + 12, T + 14.0 * double(i), W - R + 32, T + 14.0 * double(i), c, W - R + 38,
                  T + 4 + 14.0 * double(i), s.name.c_str());
    o += b;
  }
  std::snprintf(b, sizeof b, "<text x=\"%.0f\" y=\"%.0f\">ringed: the tuner's pick</text>\n", W - R + 12,
                T + 14.0 * double(series.size()) + 10);
  o += b;
  return o + "</svg>\n";
}

}  // namespace collx::probe
