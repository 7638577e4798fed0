// tools/cli.hpp — command-line helpers shared by collx-explain, collx-model and
// collx-probe: sizes with K/M/G suffixes, comma lists, size labels, and the
// collective named on the command line.
#pragma once

#include <collx/coll.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace collx::cli {

/// "8", "64K", "1M", "2G" (powers of 1024, optional trailing B) → bytes.
inline bool parse_size(const std::string& s, double& out) {
  if (s.empty() || s[0] == '-') return false;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || !(v >= 0)) return false;
  double unit = 1;
  if (*end == 'k' || *end == 'K') unit = 1024.0, ++end;
  else if (*end == 'm' || *end == 'M') unit = 1024.0 * 1024, ++end;
  else if (*end == 'g' || *end == 'G') unit = 1024.0 * 1024 * 1024, ++end;
  if (unit != 1 && (*end == 'B' || *end == 'b')) ++end;
  if (*end != '\0') return false;
  out = v * unit;
  return true;
}

inline std::vector<std::string> split(const std::string& s, char sep = ',') {
  std::vector<std::string> v;
  std::size_t p = 0;
  while (p <= s.size()) {
    const std::size_t c = s.find(sep, p);
    v.push_back(s.substr(p, c == std::string::npos ? std::string::npos : c - p));
    p = c == std::string::npos ? s.size() + 1 : c + 1;
  }
  return v;
}

/// 1048576 → "1M".
inline std::string human(double b) {
  char buf[32];
  if (b >= 1 << 30) std::snprintf(buf, sizeof buf, "%.4gG", b / (1 << 30));
  else if (b >= 1 << 20) std::snprintf(buf, sizeof buf, "%.4gM", b / (1 << 20));
  else if (b >= 1 << 10) std::snprintf(buf, sizeof buf, "%.4gK", b / (1 << 10));
  else std::snprintf(buf, sizeof buf, "%.4g", b);
  return buf;
}

/// The collective named s.
inline bool parse_coll(const std::string& s, coll& out) {
  for (int i = 0; i < coll_count; ++i)
    if (s == name(static_cast<coll>(i))) return out = static_cast<coll>(i), true;
  return false;
}

/// Sizes from -b/-e/-f (lo, hi, factor) unless a list was given.
inline std::vector<double> sweep(double lo, double hi, double factor) {
  std::vector<double> v;
  for (double s = lo; s <= hi; s = factor > 1 ? s * factor : hi + 1) v.push_back(s);
  return v;
}

}  // namespace collx::cli
